"""The evidence a study's runs recorded, as the explainers read it (docs/explain.md).

    evidence_of(store, study_id) -> {run_id: [per-rank dict, by rank]}

Each per-rank dict has collect.FIELDS (rank, pid, host, cpus_allowed, cpu_start, cpu_end,
migrations, numa_node, ns, launcher_ns, cgroup, seccomp, ld_audit, ld_preload, t_main_s,
t_init_end_s, mpi_library, mpi_profile) and a few more. The launcher's own row (rank -1) is
not in the list: its namespaces are every rank's launcher_ns; launcher_of() gives it whole.
A store from before schema 4 has no evidence: {}.
"""

import json


def _rows(store, study_id):
    for row in store.evidence(study_id):
        try:
            value = json.loads(row["evidence_json"])
        except ValueError:
            continue  # not written by nearmetal: nothing to read
        if isinstance(value, dict):
            yield row["run_id"], row["rank"], value


def evidence_of(store, study_id):
    """{run_id: [per-rank dict sorted by rank]} for the study's runs that recorded evidence."""
    out = {}
    for run_id, rank, value in _rows(store, study_id):
        if rank >= 0:
            out.setdefault(run_id, []).append(value)
    return out


def launcher_of(store, study_id):
    """{run_id: the launching side's facts (ns, cgroup, launch_ns, host, pid)}."""
    return {run_id: value for run_id, rank, value in _rows(store, study_id) if rank < 0}
