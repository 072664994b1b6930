"""What the Slurm reachable from an environment offers, and the settings that will hurt.

`detect(env)` never hangs: it returns None at once when there is no slurm.conf to read
(Slurm's clients retry a missing SLURM_CONF for 60 s) and after one `scontrol ping`
(milliseconds, also when the controller is down; `sinfo` and `scontrol show config` retry a
dead controller for ~9 s) before asking anything else, with a few seconds' timeout on every
command.
"""

import os
import shutil
import subprocess

TIMEOUT = 4.0
# Where clients find slurm.conf without SLURM_CONF: Debian's path, the old Debian path, and
# the cache slurmd keeps in configless mode.
CONF_PATHS = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/run/slurm/conf/slurm.conf")
def conf_path(env=None):
    """The slurm.conf clients would read in `env`, or None when there is none."""
    env = os.environ if env is None else env
    conf = env.get("SLURM_CONF")
    if conf:
        return conf if os.path.isfile(conf) else None
    for path in CONF_PATHS:
        if os.path.isfile(path):
            return path
    return None


def detect(env=None):
    """A dict describing the reachable Slurm, or None when none is reachable."""
    env = dict(os.environ if env is None else env)
    env.setdefault("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
    conf = conf_path(env)
    if conf is None or not shutil.which("srun", path=env["PATH"]) or not shutil.which("scontrol", path=env["PATH"]):
        return None
    ping = _run(["scontrol", "ping"], env)
    if ping is None or " is UP" not in ping:
        return None
    outs = _run_all({"config": ["scontrol", "show", "config"], "version": ["srun", "--version"],
                     "mpi": ["srun", "--mpi=list"], "nodes": ["sinfo", "-h", "-N", "-o", "%N|%P"]}, env)
    if outs["config"] is None:
        return None
    config = parse_config(outs["config"])
    nodes, partitions = parse_nodes(outs["nodes"] or "")
    scheduler = config.get("SchedulerType", "")
    version = (outs["version"] or "").split()
    return {
        "version": version[-1] if version else config.get("SLURM_VERSION", ""),
        "conf": config.get("SLURM_CONF", conf),
        "cluster": config.get("ClusterName", ""),
        "controller": config.get("SlurmctldHost[0]", config.get("SlurmctldHost", "")),
        "scheduler": scheduler,
        "select": config.get("SelectType", ""),
        "mpi_default": config.get("MpiDefault", ""),
        "mpi_plugins": parse_mpi_list(outs["mpi"] or ""),
        "nodes": len(nodes),
        "partitions": partitions,
        "hetjob": scheduler == "sched/backfill" and len(nodes) >= 2,
        "in_allocation": bool(env.get("SLURM_JOB_ID")),
        "job_id": env.get("SLURM_JOB_ID") or None,
    }


def _run(argv, env):
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout + out.stderr if out.returncode == 0 else None


def _run_all(commands, env):
    """Run the commands side by side (each takes milliseconds); {name: output or None}."""
    procs = {}
    for name, argv in commands.items():
        try:
            procs[name] = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           stdin=subprocess.DEVNULL, text=True)
        except OSError:
            procs[name] = None
    outs = {}
    for name, p in procs.items():
        if p is None:
            outs[name] = None
            continue
        try:
            out, err = p.communicate(timeout=TIMEOUT)
            outs[name] = out + err if p.returncode == 0 else None
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            outs[name] = None
    return outs


def parse_config(text):
    """`scontrol show config` -> {key: value}."""
    config = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def parse_mpi_list(text):
    """`srun --mpi=list` -> sorted plugin names.

    22.05 prints "MPI plugin types are..." then one tab-indented name per line and
    "specific pmix plugin versions available: pmix_v4"; older releases print
    "srun: MPI types are..." then "srun: pmi2" lines."""
    names = set()
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("srun:"):
            line = line[5:].strip()
        if not line or line.endswith("...") or line.lower().startswith(("mpi plugin types", "mpi types")):
            continue
        if ":" in line:
            head, _, tail = line.partition(":")
            if "versions available" in head:
                names.update(t.strip() for t in tail.replace(",", " ").split() if t.strip())
            continue
        if " " not in line:
            names.add(line)
    return sorted(names)


def parse_nodes(text):
    """`sinfo -h -N -o %N|%P` -> (node names, [{"name", "nodes", "default"}])."""
    nodes, parts = set(), {}
    for line in text.splitlines():
        node, _, part = line.strip().partition("|")
        if not node:
            continue
        nodes.add(node)
        default = part.endswith("*")
        name = part.rstrip("*")
        entry = parts.setdefault(name, {"name": name, "nodes": 0, "default": False})
        entry["nodes"] += 1
        entry["default"] = entry["default"] or default
    return sorted(nodes), list(parts.values())


def has_pmi(info, flavour):
    plugins = info.get("mpi_plugins") or []
    return any(p == flavour or p.startswith(flavour + "_") for p in plugins)


def hazards(info, environ=None, mpis=None):
    """Slurm settings known to hurt (containerized) MPI jobs: [{variable, value, why, fix}].

    info: detect()'s result (None: no Slurm reachable: only environment checks); mpis: the
    MPI families that will run under srun in hybrid mode (default: the host's)."""
    environ = os.environ if environ is None else environ
    found = []
    for var, option, also in (
            ("SLURM_EXPORT_ENV", "srun --export", "; srun's tasks then get only SLURM_* and PMI variables (no PATH, "
                                                  "no LD_LIBRARY_PATH)"),
            ("SBATCH_EXPORT", "sbatch --export", "; the batch script's environment is then rebuilt from a login "
                                                 "shell on the node, not the submitting one")):
        value = environ.get(var)
        if value and value.split(",")[0].strip().upper() in ("NONE", "NIL"):
            found.append({
                "variable": var, "value": value,
                "why": f"{var}={value} is `{option}=NONE`: heterogeneous jobs (`srun -n1 a : -n2 b`) hung right "
                       f"after launch with it on GFDL's Gaea (simple tests and ESM4){also}",
                "fix": f"unset {var} (Slurm's default is --export=ALL) for heterogeneous jobs; for a clean "
                       "environment, set it up inside the job script instead"})
    if not info:
        return found
    plugins = info.get("mpi_plugins") or []
    mpi_type = environ.get("SLURM_MPI_TYPE")
    if mpi_type and mpi_type not in plugins:
        found.append({
            "variable": "SLURM_MPI_TYPE", "value": mpi_type,
            "why": f"srun --mpi={mpi_type} is not offered by this Slurm (srun --mpi=list: {', '.join(plugins) or 'nothing'}): "
                   "every srun fails",
            "fix": f"unset SLURM_MPI_TYPE or set it to one of: {', '.join(plugins)}"})
    if mpis is None:
        mpis = _host_mpis()
    shown = ", ".join(plugins) or "nothing"
    from ..families import get as get_family

    for fam in mpis:
        # The PMI flavour srun must offer for the family's ranks to wire up (measured with
        # Debian's Open MPI 4.1 and MPICH 4.0: the other flavour starts every rank as a singleton).
        profile = get_family(fam)
        need = profile.slurm_pmi[0] if profile.slurm_pmi else None
        if need and not has_pmi(info, need):
            name = profile.title
            found.append({
                "variable": "SLURM_MPI_TYPE", "value": mpi_type or info.get("mpi_default") or "",
                "why": f"this Slurm ({info.get('version') or '?'}) offers srun --mpi={{{shown}}} but not {need}: "
                       f"{name} ranks started by srun in hybrid mode (the container's {name} wired to srun through "
                       f"PMI) need --mpi={need}; without it {profile.slurm_pmi_failure}",
                "fix": f"launch {name} containers with mpirun inside the allocation (or use bind mode), "
                       f"or ask the site for a Slurm built with {need.upper()} support"})
    return found


def _host_mpis():
    try:
        from ..discovery.mpi import discover

        return list(discover())
    except Exception:  # no MPI, or discovery failing, must not hide the other hazards
        from ..families import names

        return list(names())
