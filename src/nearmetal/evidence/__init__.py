"""Evidence recorded for every run (docs/explain.md, "Evidence"): what each rank saw.

nm-evidence.so (csrc/) is preloaded into every rank, first: at load it notes the CPUs the
rank may use and runs on, its namespaces, cgroup limit files, seccomp mode, LD_AUDIT and
LD_PRELOAD and the time since the launch; it owns MPI_Init/MPI_Finalize among nearmetal's
preloads (the I/O tracer hooks into it), times every common MPI call (an mpiP-style
profile, C and gfortran bindings) and writes one JSON file per process into
$NM_EVIDENCE_DIR after MPI_Finalize, or at exit for a program without MPI. The executor
collects the files after each run (collect.py) into the store's run_evidence table;
read.evidence_of gives them back. Like the witness, the library lives under /tmp, which
every runtime shows at the same path, so natively and in any container the ranks preload
the same file; the staging directory is under /tmp too.
"""

import os

DIR_VAR = "NM_EVIDENCE_DIR"
CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")


def library():
    """The path, under /tmp, of a built nm-evidence.so no older than its sources."""
    from .build import library as placed

    return placed()


def preloaded(env, library_path):
    """env with library_path first in LD_PRELOAD (once): the first definition of MPI_Init
    and of each profiled function is this library's, and it forwards to the next one, so
    tools preloaded after it (the I/O tracer, a user's PMPI profiler) still see every call."""
    env = dict(env or {})
    rest = [p for p in env.get("LD_PRELOAD", "").split() if p != library_path]
    env["LD_PRELOAD"] = " ".join([library_path, *rest])
    return env


def preloaded_once(env):
    """env with the evidence library first in LD_PRELOAD unless one is there already (a study
    cell's, or a dry run's placeholder): built only where none is."""
    if any(os.path.basename(p).startswith("nm-evidence-") for p in (env or {}).get("LD_PRELOAD", "").split()):
        return dict(env)
    return preloaded(env, library())


def rank_env(env, stage, dry=False):
    """The ranks' environment with the evidence library preloaded and writing into `stage`; a
    dry run names where the library will be and builds nothing."""
    env = preloaded(env, os.path.join("/tmp", f"nearmetal-{os.getuid()}", "nm-evidence-BUILT.so") if dry
                    else library())
    env[DIR_VAR] = stage
    return env
