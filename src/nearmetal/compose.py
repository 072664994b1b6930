"""Composing a launch: model -> runtime -> launcher, from resolved components to one argv.

compose() is a pure function of its inputs — the resolved components, what the MPI model
decided for each (ModelPlan), and the few facts about this machine it needs (cores, the
current environment, a job tag) — so every runtime x launcher x mode x scheduler
combination can be checked argv for argv without starting anything.
"""

# Where a container sees --workdir: a mount point every nearmetal image has (image.MOUNT_POINTS).
CONTAINER_WORKDIR = "/nm/work"


def component_tag(tag, i):
    """The tag of a job's i-th (MPMD) component: what its containers' peer groups are named by."""
    return tag if i == 0 else f"{tag}c{i}"


def compose(components, models, cores, environ, tag, gpus=None, binding=None):
    """(argv, launcher environment delta, notes) for resolved components and their models;
    gpus: a gpu.plan.GpuPlan (or None) per component, for --gpus; binding: the job's binding
    as launchers/_binding.decide made it (None: the launcher's default)."""
    from . import launchers

    first = components[0]
    scheduler, profile, installation = first.scheduler, first.profile, first.installation
    launcher = launchers.get(scheduler.launcher(profile), installation, first)
    total = sum(c.ranks for c in components)
    # What the family's ranks need when they run in containers, and in separate namespaces
    # (MPMD components, or a container per rank where the scheduler places ranks).
    separate = (len(components) > 1 or scheduler.one_container_per_rank
                or any(c.runtime.separates_ranks(c.runtime_args) for c in components if c.runtime))
    shared = profile.cross_namespace_env(containers=any(c.in_container for c in components),
                                         separate_namespaces=separate)
    gpus = gpus or [None] * len(components)
    parts = [_component(c, m, component_tag(tag, i), total, shared, cores, gpu)
             for i, (c, m, gpu) in enumerate(zip(components, models, gpus))]
    launch_env, notes = {}, []
    for _, env, n in parts:
        launch_env.update(env)
        notes += n
    from . import networks
    from .launchers._binding import CHOICES

    network = networks.get(first.network)
    hosts, agent = network.hosts(total), network.agent()  # the host's: the launcher's own placement
    used = (binding or {}).get("used")
    for p in parts:
        p[0].hosts, p[0].agent = hosts, agent
        p[0].binding = used if used in CHOICES else None
    if binding and binding.get("reason"):
        notes.append(f"binding: {binding['reason']}")
    notes += network.notes(total)
    if network.emulated and profile.tcp_between_nodes_hazard:
        notes.append(profile.tcp_between_nodes_hazard)
    if len(parts) > 1:
        argv, extra = launcher.command_mpmd([p[0] for p in parts])
        notes.append(f"MPMD: {len(parts)} components, {total} ranks in one MPI_COMM_WORLD")
    else:
        argv, extra = launcher.command(parts[0][0])
    launch_env.update(extra)
    argv = network.wrap(argv, total)
    if installation.get("prefix"):  # an installation under a prefix (--mpi FAMILY@PREFIX)
        launch_env.update(profile.prefix_env(installation))
    launch_env = {k: v for k, v in launch_env.items() if environ.get(k) != v}
    if first.workdir and any(c.in_container for c in components):
        notes.append(f"containers: {first.workdir} mounted read-write at {CONTAINER_WORKDIR}, ranks start there")
    return argv, launch_env, notes


def _component(c, model, tag, total_ranks, shared_env, cores, gpu=None):
    """(LaunchRequest, launcher environment, notes) for one resolved component."""
    from .launchers.base import LaunchRequest

    launch_env = {}
    # OpenMP placement is explicit, never the runtime's default of one thread per core;
    # oversubscribed ranks must not spin-wait (5-7x slower when they do).
    rank_env = {"OMP_NUM_THREADS": str(c.threads)}
    if total_ranks * c.threads > cores:
        rank_env["OMP_WAIT_POLICY"] = "passive"
    rank_env.update(shared_env)
    rank_env.update(c.env)
    runtime, writable = c.runtime, None
    if runtime is None:
        rank_argv = model.argv
    else:
        from .runtimes.base import Mount, RankSpec

        container_env = dict(model.env)
        if gpu is not None:  # the driver libraries after the MPI model's own (gpu/plan.py)
            from .gpu.plan import library_path

            container_env = {**gpu.env, **container_env}
            if "LD_LIBRARY_PATH" in gpu.env:
                container_env["LD_LIBRARY_PATH"] = library_path(model.env)
        if c.workdir:
            # Open MPI and podman --env-host hand the host's $PWD on; shells and Fortran
            # runtimes trust $PWD when it names the same directory (through /tmp).
            container_env["PWD"] = CONTAINER_WORKDIR
        # User --env goes into the container: the runtime sets it there.
        container_env.update(rank_env)
        rank_env = {}
        # Namespace joining needs the exact peer count per node, which a resource manager
        # decides at run time: there every rank gets its own container.
        peers = 1 if c.scheduler.one_container_per_rank else (c.ranks_per_node or c.ranks)
        mounts, inner_cwd = list(model.mounts), None
        if c.workdir:
            mounts.append(Mount(c.workdir, CONTAINER_WORKDIR, readonly=False))
            inner_cwd = CONTAINER_WORKDIR
            # large inputs, read-only over their placeholders in the working directory
            mounts += [Mount(src, f"{CONTAINER_WORKDIR}/{name}", readonly=True) for src, name in c.workdir_binds]
        share_dev = False
        if runtime.private_dev_shm(c.runtime_args):
            # A private /dev/shm per rank: the family's segments go to the shared /tmp,
            # or, where it cannot move them, the host's /dev comes in.
            moved = c.profile.shm_in("/tmp")
            share_dev = moved is None
            container_env = {**(moved or {}), **container_env}
        runtime_args = list(gpu.args) + list(c.runtime_args) if gpu is not None else c.runtime_args
        spec = RankSpec(c.image, model.argv, env=container_env, mounts=mounts, ranks_per_node=peers, tag=tag,
                        image_format=c.image_format, workdir=inner_cwd, runtime_args=runtime_args)
        spec.share_dev = share_dev
        spec.devices = list(getattr(model, "devices", []))
        rank_argv = runtime.wrap(spec)
        writable = runtime.writable_binds_note(mounts)
        rank_env = runtime.rank_env(spec)
        launch_env.update(runtime.launch_env())
    if gpu is not None and gpu.visible is not None:
        from .gpu._visible import wrap as gpu_wrap

        rank_argv = gpu_wrap(rank_argv, gpu.visible, gpu.env_prefix)
    lreq = LaunchRequest(c.ranks, rank_argv, ranks_per_node=c.ranks_per_node, threads=c.threads, env=rank_env,
                         pmi_port=bool(runtime and runtime.needs_pmi_port), cores=cores)
    lreq.total_ranks = total_ranks
    return lreq, launch_env, (list(model.notes) + (runtime.notes(c.runtime_args) if runtime else [])
                              + ([writable] if writable else [])
                              + (gpu.notes if gpu is not None else []))
