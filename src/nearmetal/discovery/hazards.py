"""Environment settings known to hurt containerized MPI jobs, each with an explanation and a fix."""

import os

CHECKS = (
    ("LD_AUDIT", "library-call interception through LD_AUDIT slowed ATLAS jobs 3x on Titan (rtld-audit on every symbol binding)",
     "unset LD_AUDIT for benchmark and production runs; measure what an auditor costs here with "
     "`nearmetal run --audit` or examples/seeds/002-image-audit.toml"),
    ("SINGULARITYENV_LD_AUDIT", "is passed into Singularity/Apptainer containers as LD_AUDIT (the 3x ATLAS slowdown on Titan)",
     "unset SINGULARITYENV_LD_AUDIT"),
    ("APPTAINERENV_LD_AUDIT", "is passed into Apptainer containers as LD_AUDIT (the 3x ATLAS slowdown on Titan)",
     "unset APPTAINERENV_LD_AUDIT"),
    ("LD_PRELOAD", "preloads libraries into every process, including MPI ranks inside containers where the paths may not exist",
     "unset LD_PRELOAD, or pass it to the ranks only with --env"),
)


def find(environ=None):
    environ = os.environ if environ is None else environ
    found = []
    for var, why, fix in CHECKS:
        value = environ.get(var)
        if value:
            found.append({"variable": var, "value": value, "why": f"{var} {why}", "fix": fix})
    return found
