"""The environment a study cell's ranks get, in the order later settings win: the MPI
family's transport reporting (the context's `transport`), `pin`'s OMP_* settings, the
benchmark's `env`, a named variant's own `env` (what it compares), then what wraps every
variable already set: the witness (`[study] witness`) and the rtld-audit library (`audit`)."""


def rank_env(config, bench, variant):
    from ... import families
    from ...discovery.mpi import split

    family, _prefix = split(variant["mpi"])  # FAMILY or FAMILY@PREFIX (an installation of its own)
    env = dict(families.get(family).transport_env)
    if config.study.pin:
        env.update({"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"})
    env.update(bench.env)
    env.update(variant.get("env", {}))
    if config.study.witness:
        from ...witness import rank_env as witnessed

        env = witnessed(env)
    if variant.get("audit"):  # the ranks under the rtld-audit library (audit/)
        from ...audit import rank_env as audited

        env = audited(env)
    return env
