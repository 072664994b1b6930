"""`nearmetal doctor`: what this host offers for containerized MPI, and what will go wrong.

Runtimes are judged by a real container start (of /bin/true in a tiny rootfs made from
the host's own /bin/true and its loader), not by `--version`.
"""

import os
import shutil
import subprocess

from . import __version__
from .errors import NearmetalError

SMOKE_TIMEOUT = 120


def smoke_rootfs():
    """A minimal rootfs: /bin/true, the libraries it needs, and the mount points runtimes use."""
    from .elf import LinkerView, read_elf
    from .home import subdir

    root = subdir("smoke") / "rootfs"
    if (root / "bin" / "true").exists():
        return root
    tmp = root.with_name(f"rootfs.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    for d in ("bin", "dev", "proc", "sys", "tmp", "etc", "home", "root", "nm/host-mpi"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    os.chmod(tmp / "tmp", 0o1777)
    true = shutil.which("true") or "/bin/true"
    shutil.copy2(true, tmp / "bin" / "true")
    info = read_elf(true)
    files = [lib.path for lib in LinkerView("/").closure(true, skip_glibc=False)]
    if info.interp:
        files.append(info.interp)
    for f in files:
        dst = tmp / f.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(f), dst)
    for f in ("passwd", "group", "hosts", "resolv.conf"):
        (tmp / "etc" / f).touch()
    os.rename(tmp, root)
    return root


def _smoke(runtime, rootfs):
    try:
        runtime.prepare_smoke(rootfs)
        argv = runtime.smoke_argv(rootfs)
        out = subprocess.run(argv, capture_output=True, text=True, timeout=SMOKE_TIMEOUT,
                             env=runtime.env_for_tools(), stdin=subprocess.DEVNULL)
    except NearmetalError as e:
        return False, str(e)
    except subprocess.TimeoutExpired:
        return False, f"container start timed out after {SMOKE_TIMEOUT}s"
    except OSError as e:
        return False, str(e)
    if out.returncode == 0:
        return True, "started a container running /bin/true"
    tail = (out.stderr or out.stdout).strip().splitlines()
    return False, f"exit {out.returncode}: {tail[-1] if tail else 'no output'}"


def runtime_starts(runtime):
    """(works, detail): whether `runtime` starts a container of /bin/true here."""
    return _smoke(runtime, smoke_rootfs())


def runtimes_report():
    from . import runtimes

    report = []
    rootfs = None
    for name in runtimes.names():
        rt = runtimes.get(name)
        entry = {"name": name, "path": rt.path(), "version": rt.version(), "works": False, "detail": ""}
        if not entry["path"]:
            entry["detail"] = f"{rt.binary} not installed" + (f" ({rt.install_hint})" if rt.install_hint else "")
        else:
            rootfs = rootfs or smoke_rootfs()
            entry["works"], entry["detail"] = _smoke(rt, rootfs)
            if entry["works"] and rt.notes(()):
                # what the runtime needed here to start at all (e.g. a capability dropped)
                entry["detail"] += "; " + "; ".join(n.split(": ", 1)[-1] for n in rt.notes(()))
        report.append(entry)
    return report


def mpi_report():
    from .discovery.mpi import discover

    from .discovery.mpi import other_installations

    keys = ("family", "version", "library", "soname", "abi", "compiler", "launcher", "pmi")
    # PATH's installation of each family is what the family's name means; others are named
    # FAMILY@PREFIX (--mpi, study files)
    out = [{k: m[k] for k in keys} | {"plugin_dirs": m.get("plugin_dirs", {}), "spec": fam, "cuda": _cuda(m),
                                       "io_libraries": io_libraries(fam)}
           for fam, m in discover().items()]
    out += [{k: m[k] for k in keys} | {"plugin_dirs": m.get("plugin_dirs", {}), "spec": m["spec"], "cuda": _cuda(m)}
            for m in other_installations()]
    return out


def io_libraries(family):
    """Which parallel I/O libraries nm-iobench has for a host MPI family, as it says itself
    (`nm-iobench -A`, one 1-rank launch, the I/O study's own check): {"libraries": {name:
    None (available) | why not}} or, where the host kernels are not built (doctor builds
    nothing) or the launch fails, {"libraries": None, "note": why}."""
    from .io.config import library_availability
    from .kernels.build import is_built

    if not is_built(family):
        return {"libraries": None, "note": "not known until the kernels are built for it (the first kernel run "
                                           f"builds them: nearmetal run --mpi {family} -n 1 -- nm-iobench -A)"}
    try:  # doctor's own limit: a launcher that hangs is said, not waited for as long as a study would
        have = library_availability({"mode": "native", "runtime": None, "mpi": family, "image": None}, timeout=20)
    except (NearmetalError, OSError) as e:
        return {"libraries": None, "note": str(e)}
    return {"libraries": have}


def _cuda(mpi):
    """Whether the MPI moves CUDA device buffers itself (discovery/mpi_cuda.py), from its files."""
    from .discovery.mpi_cuda import detect

    found = detect(mpi)
    return {"aware": found["cuda"], "via": found["via"], "transports": found["transports"]}


def image_report(spec, programs=()):
    from . import image as image_mod
    from .discovery.mpi import discover
    from .image import formats
    from .elf import LinkerView, glibc_release
    from .families import names as family_names
    from .program_paths import container_program
    from .programs import describe as describe_program

    img = image_mod.resolve(spec)
    view = LinkerView(img.rootfs)
    glibc = glibc_release(img.rootfs)
    report = {"name": img.name, "path": str(img.rootfs), "distro": img.distro,
              "glibc": f"{glibc[0]}.{glibc[1]}" if glibc else None, "mpi": [], "programs": [],
              # the parallel I/O libraries the build installed (image.json; imported images: none recorded)
              "io_packages": _strings(img.meta.get("io_packages"), dict),
              "io_packages_unavailable": _strings(img.meta.get("io_packages_unavailable"), list)}
    named = formats.of_path(spec)
    if named and formats.get(named).stands_for_image and img.location(named):
        # the file the user named; its contents were read from rootfs
        report.update(path=str(img.location(named)), inspected=str(img.rootfs))
    for fam in img.mpis:
        meta = (img.meta.get("mpi") or {}).get(fam, {})
        report["mpi"].append({"family": fam, "version": meta.get("version"), "library": meta.get("library"),
                              "soname": meta.get("soname")})
    paths = []
    if programs:
        for p in programs:
            paths.append(container_program(img, p, img.mpis[0] if img.mpis else family_names()[0])[0])
    else:  # nearmetal's kernels (if the image has them), then every MPI-linked program in it
        from .programs import mpi_programs

        for fam in img.mpis:
            bindir = view.host_path(img.kernel_bin(fam))
            if bindir.is_dir():
                paths += [f"{img.kernel_bin(fam)}/{f}" for f in sorted(os.listdir(bindir))]
        paths += [p for p in mpi_programs(img.rootfs) if p not in paths]
    host_mpis = discover()
    for path in paths:
        entry = describe_program(view.host_path(path), shown_path=path)
        entry["bind"] = [_bind_check(img, path, fam, m) for fam, m in host_mpis.items()]
        report["programs"].append(entry)
    return report


def _strings(value, kind):
    """A dict or list of strings from image.json (an imported image's, written by anyone), or an
    empty one where it is not that."""
    if kind is dict and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    if kind is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return kind()


def _bind_check(img, path, family, installation):
    from .models import bind
    from .resolve import Resolved
    from .run import RunRequest

    # bind.prepare reads a resolved component: the image object and the host MPI's installation
    req = Resolved(RunRequest(path, mode="bind", mpi=family), installation, None, img, None, None)
    try:
        plan = bind.prepare(req)
    except bind.BindRefused as e:
        return {"host_mpi": family, "possible": False, "reason": str(e), "why": e.why, "remedy": e.remedy,
                "other_mpi": e.other_mpi}
    except NearmetalError as e:
        return {"host_mpi": family, "possible": False, "reason": str(e)}
    how = "ld.so --preload" if plan.argv and "--preload" in plan.argv else "LD_LIBRARY_PATH"
    return {"host_mpi": family, "possible": True, "reason": f"ABI and glibc compatible; host library preferred via {how}"}


def collect(image=None, programs=()):
    """The whole report. programs: with an image, programs inside it; without one, host
    programs (report["programs"])."""
    from .discovery import cpu, hazards

    report = {
        "nearmetal_version": __version__,
        "mpi": mpi_report(),
        "runtimes": runtimes_report(),
        "cpu": cpu.describe(),
        "hazards": hazards.find(),
    }
    from .gpu import report as gpu_report

    report["gpu"] = gpu_report.collect()
    from .discovery import shm

    report["shm"] = shm.describe()
    slurm = slurm_report()
    if slurm:
        report["slurm"] = slurm
    if image:
        report["image"] = image_report(image, programs)
    elif programs:
        from .programs import host_program

        report["programs"] = [host_program(p) for p in programs]
    return report


def slurm_report(environ=None):
    """The Slurm reachable from this environment (None: none; detect() answers at once
    when there is no slurm.conf), with the Slurm hazards for the host's MPIs."""
    from .slurm import info

    found = info.detect(environ)
    if found is None:
        return None
    return found | {"hazards": info.hazards(found, environ)}


def render_slurm(slurm, console):
    if not slurm:
        from rich.markup import escape

        from .slurm.cluster import unreachable_hint

        console.print("[bold]Slurm[/] none reachable (no slurm.conf, or its controller is down); "
                      + escape(unreachable_hint()), highlight=False)
        return
    parts = ", ".join(f"{p['name']}{'*' if p['default'] else ''} ({p['nodes']})" for p in slurm["partitions"]) or "none"
    het = "yes" if slurm["hetjob"] else f"no ({slurm['scheduler']}, {slurm['nodes']} nodes: needs sched/backfill and >= 2)"
    console.print(f"[bold]Slurm[/] {slurm['version']} cluster {slurm['cluster'] or '?'}, {slurm['nodes']} nodes, "
                  f"partitions {parts}; conf {slurm['conf']}", highlight=False)
    console.print(f"  srun --mpi: {', '.join(slurm['mpi_plugins']) or 'none listed'} (default {slurm['mpi_default'] or '?'})"
                  f"   heterogeneous jobs: {het}"
                  + (f"   inside job {slurm['job_id']}" if slurm["in_allocation"] else ""), highlight=False)
    for h in slurm["hazards"]:
        console.print(f"  [yellow]hazard[/] {h['variable']}={h['value']}: {h['why']}. Fix: {h['fix']}", highlight=False)


def clean_shm():
    """doctor --clean-shm: remove this account's stale MPI segments; the line that says so."""
    from .discovery.shm import SHM, remove_stale

    removed, freed = remove_stale()
    return f"removed {removed} stale MPI segment{'s' * (removed != 1)} ({freed / 2**20:,.1f} MiB) from {SHM}"


def render_shm(shm, cores, console):
    """/dev/shm's size and free space; hazards: too little free for a full node's ranks, and
    segments stopped MPI jobs left."""
    from .discovery.shm import SEGMENT_BYTES_PER_RANK

    if shm is None:
        console.print("[yellow]hazard[/] no /dev/shm: MPI ranks on a node have nowhere to share memory", highlight=False)
        return
    mib = 2**20
    console.print(f"[bold]Shared memory[/] {shm['path']}: {shm['total_bytes'] / mib:,.0f} MiB, "
                  f"{shm['free_bytes'] / mib:,.0f} MiB free", highlight=False)
    need = cores * SEGMENT_BYTES_PER_RANK
    if shm["free_bytes"] < need:
        console.print(f"  [yellow]hazard[/] {shm['free_bytes'] / mib:,.0f} MiB free is less than a full node's ranks "
                      f"use ({cores} x {SEGMENT_BYTES_PER_RANK // mib} MiB for Open MPI's segments): jobs fail with a "
                      f"bus error or fall back to slower transports. Fix: free space there, or ask for a larger "
                      f"/dev/shm", highlight=False)
    if shm["stale_segments"]:
        console.print(f"  [yellow]hazard[/] {shm['stale_segments']} MPI segments ({shm['stale_bytes'] / mib:,.1f} MiB) "
                      f"of yours that no process uses, left by jobs stopped before MPI_Finalize: they hold the node's "
                      f"memory, and a name clash can fail a new job. Fix: nearmetal doctor --clean-shm", highlight=False)


def render(report, console):
    """Human-readable report: short tables for the overview, indented lines for long paths."""
    from rich.table import Table

    console.print("[bold]MPI installations[/]")
    if not report["mpi"]:
        console.print("  none found: install Open MPI or MPICH (Debian: openmpi-bin libopenmpi-dev, mpich libmpich-dev)")
    for m in report["mpi"]:
        means = "  (what '--mpi " + m["spec"] + "' means)" if m.get("spec", m["family"]) == m["family"] \
            else f"  (--mpi {m['spec']})"
        console.print(f"  [bold]{m['family']}[/] {m['version']}  ABI {m['abi']} ({m['soname']})  PMI: {', '.join(m['pmi'])}"
                      + means, highlight=False)
        console.print(f"    library  {m['library']}", highlight=False)
        console.print(f"    compiler {m['compiler']}   launcher {m['launcher']}", highlight=False)
        _render_io(m.get("io_libraries"), console)
    t = Table(title="Container runtimes", title_justify="left", title_style="bold")
    for col in ("name", "version", "works", "detail"):
        t.add_column(col)
    for r in report["runtimes"]:
        t.add_row(r["name"], r["version"] or "-", "[green]yes[/]" if r["works"] else "[red]no[/]", r["detail"])
    console.print(t)
    c = report["cpu"]
    console.print(f"[bold]CPU[/] {c['model']}, {c['cores']} cores, widest SIMD: {c['simd']}")
    if report["hazards"]:
        for h in report["hazards"]:
            console.print(f"[yellow]hazard[/] {h['variable']}={h['value']}: {h['why']}. Fix: {h['fix']}", highlight=False)
    else:
        console.print("No environment hazards (LD_AUDIT, LD_PRELOAD, ...) found.")
    render_shm(report.get("shm"), report["cpu"]["cores"], console)
    render_slurm(report.get("slurm"), console)
    if "gpu" in report:
        from .gpu import report as gpu_report

        gpu_report.render(report["gpu"], console)
        from .discovery.mpi_cuda import NO_CUDA

        for m in report["mpi"] if report["gpu"]["gpus"] else []:  # no GPU: no device buffer to move (--json has it)
            cuda = m.get("cuda") or {}
            line = f"CUDA-aware: {'; '.join(cuda['via'])}" if cuda.get("aware") else NO_CUDA
            console.print(f"  {m['spec']}: {line}", highlight=False)
    img = report.get("image")
    if img:
        console.print(f"\n[bold]Image {img['name']}[/] ({img['distro']}, glibc {img['glibc']})", highlight=False)
        console.print(f"  {img['path']}", highlight=False)
        for m in img["mpi"]:
            console.print(f"  MPI {m['family']} {m['version'] or '?'}  {m['library'] or ''}", highlight=False)
        if img.get("io_packages"):
            console.print("  parallel I/O  " + ", ".join(f"{p} {v}" for p, v in sorted(img["io_packages"].items())),
                          highlight=False)
        if img.get("io_packages_unavailable"):
            console.print("  parallel I/O  not in the distribution's archive: " + ", ".join(img["io_packages_unavailable"]),
                          highlight=False)
        for p in img["programs"]:
            _render_program(p, console)
            none_binds = bool(p["bind"]) and not any(b["possible"] for b in p["bind"])
            for b in p["bind"]:
                mark = "[green]bind ok[/]" if b["possible"] else "[red]no bind[/]"
                reason = b["reason"].replace("bind mode refused: ", "")
                if none_binds and b.get("other_mpi"):  # another --mpi is no way out when it cannot bind either
                    reason = b["why"]
                console.print(f"    {mark} with host {b['host_mpi']}: {reason}", highlight=False)
            if none_binds:
                console.print("    no host MPI binds into this image: --mode hybrid runs the image's own MPI",
                              highlight=False)
    for p in report.get("programs", []):  # host programs (--program without --image)
        if p is report["programs"][0]:
            console.print("\n[bold]Programs[/] (host)", highlight=False)
        _render_program(p, console)


def _render_io(io, console):
    """A host MPI's parallel I/O libraries, as nm-iobench -A reported them."""
    if not io:
        return
    if io.get("libraries") is None:
        console.print(f"    parallel I/O {io.get('note')}", highlight=False)
        return
    have = [name for name, why in io["libraries"].items() if why is None]
    console.print(f"    parallel I/O {', '.join(have) or 'none'}", highlight=False)
    for name, why in io["libraries"].items():
        if why is not None:
            console.print(f"      {name} unavailable: {why}", highlight=False)


def _render_program(p, console):
    console.print(f"  [bold]{p['path']}[/]  MPI {p['mpi_soname'] or 'none'}, linkage {p['linkage']}"
                  f"{' ' + ':'.join(p['rpath'] or p['runpath']) if p['linkage'] != 'none' else ''}, SIMD {p['simd']}",
                  highlight=False)
