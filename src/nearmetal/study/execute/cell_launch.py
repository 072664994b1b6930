"""A cell's launch, composed once for all its runs (argv and environment do not change
between repetitions): the RunRequest its variant and benchmark make, the run.Plan composed
from it, and what the runs need besides (the I/O tracer's staging directory, how its image
is read) — or why the cell cannot start, which each of its runs then records."""

import os
from dataclasses import dataclass, field

from ...errors import NearmetalError


@dataclass(frozen=True)
class CellLaunch:
    """launch: the run.Plan; request: the RunRequest it came from; kernel: the kernel's spec
    (None for a program); traced: (staging directory, layers) of a `trace = true` benchmark;
    image: how its image is read ({cold_cache, image: {format, path, place}}, study/execute/image_variant.py);
    error: the NearmetalError that keeps the cell from starting (then nothing else is set);
    evidence: the staging directory of the ranks' evidence files (None: `evidence = false`)."""

    benchmark: object = None
    launch: object = None
    request: object = None
    kernel: object = None
    traced: tuple | None = None
    image: dict = field(default_factory=dict)
    error: NearmetalError | None = None
    evidence: str | None = None

    @property
    def cold(self):
        return bool(self.image.get("cold_cache"))


def compose(config, cell, placer, store, db_path=None):
    """The CellLaunch of a cell (study/records.Cell); store None: a dry run, which creates
    nothing (no working directory, no staging directory, no image preparation)."""
    from ... import kernels, schedulers
    from ...run import RunRequest, plan
    from ..config import placement
    from .cell_env import rank_env
    from ..config.config import make_workdir
    from ..config.mpmd import more_requests, parts
    from ..config.program import hand_over, large_inputs, working_dir

    bench, variant, dry = cell.benchmark, cell.variant, store is None
    workdir, own_dir = working_dir(config, bench, variant, cell.key, store, db_path)
    if bench.is_program():  # any program: its own argv
        spec, program, args = None, bench.command[0], bench.command[1:]
    else:
        spec = kernels.get(bench.kernel)
        program, args = spec.program, list(bench.args or spec.default_args)
    env, traced, evidence = rank_env(config, bench, variant), None, None
    if config.study.evidence:  # first in LD_PRELOAD: the tracer below hooks into it
        from ...evidence import collect, rank_env as with_evidence

        evidence = collect.staging(other_account=bool(variant.get("user")), dry=dry)
        env = with_evidence(env, evidence, dry=dry)
    if bench.trace_layers() is not None:  # the I/O tracer in the ranks (study/config/traced.py)
        from ..config.traced import staging_env

        env, stage = staging_env(env, bench.trace_layers(), dry=dry)
        traced = (stage, bench.trace_layers())
    scheduler = schedulers.get(config.study.scheduler)
    options = {k: v for k, v in config.slurm.model_dump().items() if v}
    if scheduler.multi_node and placement.uses_nodes(config):  # each cell its own nodes
        options["nodes"] = placement.nodes(variant, cell.ranks)
    components = parts(bench, args)  # a heterogeneous job: [(args, ranks)] per component
    if components:
        args = components[0][0]
    binds = [] if spec is not None else [(p, os.path.basename(p.rstrip("/"))) for p in large_inputs(bench.inputs)]
    image = {}
    try:
        image_path = _image_of(variant, placer, image)
        req = RunRequest(program, args, mode=variant["mode"], ranks_per_node=variant.get("ranks_per_node"),
                         runtime=variant["runtime"], image=image_path, mpi=variant["mpi"],
                         ranks=components[0][1] if components else cell.ranks, threads=cell.threads, env=env,
                         scheduler=scheduler.name, options=scheduler.options(options, config.study.timeout),
                         workdir=workdir, runtime_args=variant.get("runtime_args", ()),
                         network=variant.get("network"), user=variant.get("user"), workdir_binds=binds,
                         gpus=variant.get("gpus") or None,
                         binding=variant.get("binding") or config.study.binding)
        if workdir and not dry:  # created when first composed; a dry run creates nothing
            make_workdir(workdir)
            if own_dir:  # nearmetal's own run directory: the account's, for a `user` variant
                hand_over(workdir, req.user)
        if components:
            why = scheduler.heterogeneous_problem()
            if why:
                raise NearmetalError(why)
        launch = plan(req, more_requests(req, components[1:]), check_paths=not dry)
        if not dry:  # e.g. podman's import of the image for an account: not inside a run's time
            launch.prepare_account()
    except NearmetalError as e:
        return CellLaunch(bench, traced=traced, error=e, evidence=evidence)
    except (OSError, ValueError, RuntimeError) as e:  # a path or value no check foresaw: cannot run
        return CellLaunch(bench, traced=traced, evidence=evidence,
                          error=NearmetalError(f"cannot plan this run: {getattr(e, 'strerror', None) or e}"))
    return CellLaunch(bench, launch, req, spec, traced, image, evidence=evidence)


def _image_of(variant, placer, image):
    """The image path a variant's runs use (its format, a placed copy); fills `image` with
    how it is read and whether the page cache is dropped before each run (study/execute/image_variant.py)."""
    from ...image.formats import ROOTFS
    from .image_variant import check_cold, named_format

    if variant.get("cold"):
        why = check_cold()
        if why:
            raise NearmetalError(why)
        image["cold_cache"] = True
    spec = placer.image_spec(variant)
    if spec is not None and (variant.get("image_format") or variant.get("image_place")):
        image["image"] = {"format": named_format(spec) if not os.path.isdir(spec) else ROOTFS, "path": spec,
                          "place": variant.get("image_place") or None}
    return spec
