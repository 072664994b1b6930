"""Resolving a run request (resolve.py) and planning it (run.plan) without a machine: names
become backends or one-line errors naming the choices, the MPI family is chosen as documented,
MPMD components share the first one's MPI, nothing in the request is changed. The machine is a
FakeHost (test_unit_compose.py); plan() runs the real MPI models on files made in tmp_path."""

import os
import stat

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.resolve import Resolved, resolve
from nearmetal.run import RunRequest, plan
from test_unit_compose import MPIS, FakeHost, make_image, req  # noqa: F401  (machine: autouse fixture)
from test_unit_compose import machine  # noqa: F401

pytestmark = pytest.mark.unit


# -- names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw, message", [
    (dict(mpi="lam"), "unknown MPI 'lam' (choose from: openmpi, mpich)"),
    (dict(mode="hybrid", runtime="sarus"), "unknown runtime 'sarus' (choose from: charliecloud, bwrap, podman, apptainer)"),
    (dict(scheduler="pbs"), "unknown scheduler 'pbs' (choose from: local, slurm)"),
    (dict(mode="bind", runtime="Podman"), "unknown runtime 'Podman' (choose from: charliecloud, bwrap, podman, apptainer)"),
    (dict(mpi="OpenMPI"), "unknown MPI 'OpenMPI' (choose from: openmpi, mpich)"),
])
def test_unknown_names_are_one_line_errors_naming_the_choices(kw, message):
    mode = kw.pop("mode", "native")
    with pytest.raises(NearmetalError) as e:
        resolve(req(mode, **kw), host=FakeHost())
    assert str(e.value) == message
    assert "\n" not in str(e.value)


def test_unknown_mpi_is_refused_before_the_host_is_asked():
    host = FakeHost()
    with pytest.raises(NearmetalError):
        resolve(req("hybrid", mpi="lam"), host=host)
    assert host.asked == []


def test_runtime_not_installed(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name, mode=0, path=None: None)
    with pytest.raises(NearmetalError) as e:
        resolve(req("hybrid", mpi="openmpi", runtime="podman"), host=FakeHost())
    assert str(e.value) == "runtime 'podman' is not installed (podman not on PATH)"


def test_native_needs_no_runtime_and_no_image(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name, mode=0, path=None: None)  # no container runtime at all
    host = FakeHost()
    [c] = resolve(req("native", mpi="mpich"), host=host)
    assert c.runtime is None and c.image is None and not c.in_container
    assert ("image", None) not in host.asked and not any(a[0] == "image" for a in host.asked)


def test_unknown_image_error_comes_from_the_host():
    with pytest.raises(NearmetalError, match=r"^no image 'nope': build it"):
        resolve(req("hybrid", mpi="openmpi", image="nope"), host=FakeHost())


# -- which MPI family -------------------------------------------------------------------------------

def test_default_family_is_the_profiles_first_installed():
    assert resolve(req("native"), host=FakeHost())[0].installation["family"] == "openmpi"
    assert resolve(req("native"), host=FakeHost(mpis=("mpich",)))[0].installation["family"] == "mpich"


def test_no_mpi_installed():
    with pytest.raises(NearmetalError) as e:
        resolve(req("native"), host=FakeHost(mpis=()))
    assert str(e.value) == ("no MPI installation found on this host: install one (Debian: openmpi: openmpi-bin "
                            "libopenmpi-dev; mpich: mpich libmpich-dev)")


def test_asked_family_not_installed():
    with pytest.raises(NearmetalError, match=r"^no mpich installation found on this host \(found: openmpi\)$"):
        resolve(req("native", mpi="mpich"), host=FakeHost(mpis=("openmpi",)))


def test_native_program_abi_chooses_the_family(tmp_path):
    """A host program linked against MPICH is started by hydra even though Open MPI comes first."""
    prog = tmp_path / "app"
    prog.write_text("")
    host = FakeHost(program_abi="mpich")
    [c] = resolve(req("native", program=str(prog)), host=host)
    assert c.installation["family"] == "mpich" and ("program_abi", str(prog)) in host.asked


def test_native_program_of_another_mpi_abi_is_refused(tmp_path):
    """Launched by the other MPI's launcher, each rank of it would start alone as a 1-rank job and
    finish "successfully" with the numbers of one rank (a new user's study stored them as ok)."""
    prog = tmp_path / "app"
    prog.write_text("")
    prog.chmod(0o755)
    with pytest.raises(NearmetalError) as e:
        resolve(req("native", program=str(prog), mpi="mpich"), host=FakeHost(program_abi="openmpi"))
    assert str(e.value) == (f"{prog} is built against Open MPI, but mpich would launch it: each rank would start "
                            "alone as a 1-rank MPI job; use --mpi openmpi")
    with pytest.raises(NearmetalError) as e:  # its own MPI is not installed: the default family is no way out
        resolve(req("native", program=str(prog)), host=FakeHost(mpis=("openmpi",), program_abi="mpich"))
    assert str(e.value).endswith("use --mpi mpich (install mpich libmpich-dev)")
    [c] = resolve(req("native", program=str(prog), mpi="openmpi"), host=FakeHost(program_abi="openmpi"))
    assert c.installation["family"] == "openmpi"
    [c] = resolve(req("native", program=str(prog), mpi="mpich"), host=FakeHost(program_abi=None))  # links no MPI
    assert c.installation["family"] == "mpich"


def test_a_program_on_path_is_checked_and_a_kernel_is_not(tmp_path, monkeypatch):
    prog = tmp_path / "gmx_like"
    prog.write_text("")
    prog.chmod(0o755)
    import shutil

    which = shutil.which  # the machine fixture's: ch-run and the launchers
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: str(prog) if name == "gmx_like" else which(name, *a, **k))
    host = FakeHost(program_abi="openmpi")
    with pytest.raises(NearmetalError, match=r"^gmx_like is built against Open MPI, but mpich would launch it"):
        resolve(req("native", program="gmx_like", mpi="mpich"), host=host)
    assert ("program_abi", str(prog)) in host.asked
    resolve(req("native", program="nm-mpi-info", mpi="mpich"), host=host)  # built for every family
    resolve(req("hybrid", program="gmx_like", mpi="mpich"), host=host)  # the image's program: bind/hybrid check it


def test_a_program_found_on_path_chooses_the_family_as_a_path_does(tmp_path, monkeypatch):
    """`nearmetal run -- gmx_like` (no --mpi) with an MPICH build on PATH: hydra starts it, as
    for its full path; a name not found leaves the default family (the launch says not found)."""
    prog = tmp_path / "gmx_like"
    prog.write_text("")
    prog.chmod(0o755)
    import shutil

    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: str(prog) if name == "gmx_like" else which(name, *a, **k))
    host = FakeHost(program_abi="mpich")
    [c] = resolve(req("native", program="gmx_like"), host=host)
    assert c.installation["family"] == "mpich" and ("program_abi", str(prog)) in host.asked
    looked = []
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: looked.append(name) if name == "not_there_anywhere"
                        else which(name, *a, **k))
    [c] = resolve(req("native", program="not_there_anywhere"), host=FakeHost(program_abi="mpich"))
    assert c.installation["family"] == "openmpi"
    assert len(looked) == 3  # once per installed family to choose one (not per installation too), once to launch


def test_an_application_built_for_one_mpi_only_is_launched_by_it(machine):
    """A recipe build of `model` for MPICH alone (not on PATH): hydra starts it, not Open MPI's
    mpirun, which would not find it."""
    built = machine / "apps" / "model-1.0" / "mpich" / "bin" / "model"
    built.parent.mkdir(parents=True)
    built.write_text("")
    built.chmod(0o755)
    host = FakeHost(program_abi="mpich")
    [c] = resolve(req("native", program="model"), host=host)
    assert c.installation["family"] == "mpich" and ("program_abi", str(built)) in host.asked


def test_bare_program_name_is_not_inspected():
    host = FakeHost(program_abi="mpich")
    resolve(req("native", program="nm-mpi-info"), host=host)
    assert not any(a[0] == "program_abi" for a in host.asked)


def test_family_from_the_image_programs_abi():
    host = FakeHost(image_abi="mpich")
    [c] = resolve(req("bind", program="/opt/app/bin/model"), host=host)
    assert c.installation["family"] == "mpich" and c.profile.name == "mpich"
    assert ("image_program_abi", "/opt/app/bin/model") in host.asked


def test_image_without_a_known_abi_takes_the_default():
    [c] = resolve(req("hybrid", program="nm-mpi-info"), host=FakeHost(image_abi=None))
    assert c.installation["family"] == "openmpi"


def test_asked_family_wins_over_the_image():
    host = FakeHost(image_abi="mpich")
    [c] = resolve(req("hybrid", mpi="openmpi"), host=host)
    assert c.installation["family"] == "openmpi" and not any(a[0] == "image_program_abi" for a in host.asked)


# -- MPMD ------------------------------------------------------------------------------------------

def test_mpmd_component_asking_another_mpi_is_refused():
    with pytest.raises(NearmetalError) as e:
        resolve(req("native", mpi="openmpi"), [req("native", mpi="openmpi"), req("native", mpi="mpich")],
                host=FakeHost())
    assert str(e.value) == ("MPMD component 3 asks for mpich, but components share one MPI_COMM_WORLD: every "
                            "component must use openmpi")


def test_mpmd_components_share_mpi_profile_and_scheduler():
    first, second, third = resolve(req("hybrid", mpi="mpich"), [req("native", ranks=1), req("bind", runtime="bwrap")],
                                   host=FakeHost())
    assert first.installation is second.installation is third.installation
    assert first.profile is second.profile is third.profile
    assert first.scheduler is second.scheduler is third.scheduler
    assert second.image is None and second.runtime is None
    assert (first.runtime.name, third.runtime.name) == ("charliecloud", "bwrap")


def test_mpmd_component_with_the_same_mpi_is_fine():
    comps = resolve(req("native", mpi="mpich"), [req("native", mpi="mpich")], host=FakeHost())
    assert [c.installation["family"] for c in comps] == ["mpich", "mpich"]


class PrefixHost(FakeHost):
    """A host whose MPIs may also be named FAMILY@PREFIX (an installation under a prefix)."""

    def installation(self, spec):
        family, _, prefix = spec.partition("@")
        return {**super().installation(family), **({"prefix": prefix} if prefix else {})}


def test_mpmd_components_may_name_the_first_ones_mpi_under_a_prefix():
    """A study's heterogeneous benchmark gives every component the variant's MPI as written
    (FAMILY@PREFIX): that is the first component's MPI, not another one."""
    comps = resolve(req("native", mpi="mpich@/opt/mpich"), [req("native", mpi="mpich@/opt/mpich"),
                                                             req("native", mpi="mpich")], host=PrefixHost())
    assert [c.installation.get("prefix") for c in comps] == ["/opt/mpich"] * 3
    assert [c.mpi for c in comps] == ["mpich@/opt/mpich", "mpich@/opt/mpich", "mpich"]  # as each request gave it
    with pytest.raises(NearmetalError) as e:
        resolve(req("native", mpi="mpich@/opt/mpich"), [req("native", mpi="mpich@/elsewhere")], host=PrefixHost())
    assert str(e.value) == ("MPMD component 2 asks for mpich@/elsewhere, but components share one MPI_COMM_WORLD: "
                            "every component must use mpich@/opt/mpich")


# -- Resolved ----------------------------------------------------------------------------------------

def test_resolved_carries_the_request_and_leaves_it_alone():
    r = req("bind", mpi="openmpi", runtime="bwrap", ranks=6, ranks_per_node=3, threads=2, env={"A": "1"},
            scheduler="slurm", options={"partition": "p"}, workdir="/w", args=["-v"], runtime_args=["--x"])
    before = {k: getattr(r, k) for k in RunRequest.__slots__}
    [c] = resolve(r, host=FakeHost())
    assert {k: getattr(r, k) for k in RunRequest.__slots__} == before
    assert isinstance(c, Resolved)
    assert (c.program, c.args, c.mode, c.ranks, c.ranks_per_node, c.threads) == ("prog", ("-v",), "bind", 6, 3, 2)
    assert (c.env, c.workdir, c.options, c.runtime_args) == ({"A": "1"}, "/w", {"partition": "p"}, ("--x",))
    assert c.image.name == "nm-test" and c.image_format is None and c.in_container
    assert c.scheduler.name == "slurm" and c.runtime.name == "bwrap" and c.installation is MPIS["openmpi"]
    c.env["B"] = "2"
    assert r.env == {"A": "1"}


def test_use_sqfs_only_for_a_sqfs_path():
    [c] = resolve(req("hybrid", mpi="openmpi", image="/img/nm-test/nm-test.sqfs"), host=FakeHost())
    assert c.image_format == "squashfs" and c.image.name == "nm-test"
    [c] = resolve(req("hybrid", mpi="openmpi", image="nm-test"), host=FakeHost())
    assert c.image_format is None


def test_default_image_is_asked_with_none():
    host = FakeHost()
    resolve(RunRequest("prog", mode="hybrid", mpi="openmpi"), host=host)
    assert ("image", None) in host.asked


# -- run.plan(): validation, then the real MPI models --------------------------------------------

@pytest.mark.parametrize("kw, message", [
    (dict(ranks=0), "-n must be a positive number of ranks, got 0"),
    (dict(ranks=None), "-n must be a positive number of ranks, got None"),
    (dict(threads=0), "--threads must be at least 1, got 0"),
    (dict(ranks_per_node=0), "--ranks-per-node must be at least 1, got 0"),
    (dict(program=""), "no program given: nearmetal run [OPTIONS] -- PROGRAM [ARGS...]"),
    (dict(mode="teleport"), "unknown mode 'teleport' (choose from: native, hybrid, bind)"),
    (dict(runtime_args=["--x"]), "runtime arguments need a container mode (hybrid or bind)"),
    (dict(workdir=""), "--workdir: empty path"),
    (dict(workdir="/no/such/dir/x"), "--workdir /no/such/dir/x: no such directory"),
])
def test_plan_validation(kw, message):
    kw.setdefault("program", "/bin/sh")
    with pytest.raises(NearmetalError) as e:
        plan(RunRequest(mpi="openmpi", **kw), host=FakeHost())
    assert str(e.value) == message


def test_plan_workdir_must_be_a_directory(tmp_path):
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(NearmetalError, match=r"--workdir .*/f: not a directory$"):
        plan(RunRequest("/bin/sh", mpi="openmpi", workdir=str(f)), host=FakeHost())


def test_plan_native(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    prog = tmp_path / "app"
    prog.write_text("")
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    p = plan(RunRequest(str(prog), ["a b"], mpi="mpich", workdir=str(tmp_path)), host=FakeHost())
    assert p.argv == ["/usr/bin/mpiexec.hydra", "-n", "2", "-genv", "OMP_NUM_THREADS", "1", str(prog), "a b"]
    assert p.env_delta == {} and p.notes == [] and p.cwd == str(tmp_path)
    assert [c.installation["family"] for c in p.components] == ["mpich"]
    assert p.describe() == f"# working directory: {tmp_path}\n/usr/bin/mpiexec.hydra -n 2 -genv OMP_NUM_THREADS 1 {prog} 'a b'"


def test_plan_native_program_missing():
    with pytest.raises(NearmetalError, match=r"^program not found: /no/such/program$"):
        plan(RunRequest("/no/such/program", mpi="openmpi"), host=FakeHost())


def _rootfs(tmp_path, *programs):
    root = tmp_path / "rootfs"
    for p in programs:
        f = root / p.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("")
        f.chmod(0o755)
    return root


def test_plan_hybrid_finds_the_program_in_the_image(monkeypatch, tmp_path):
    """models/hybrid.py on a synthetic rootfs: a bare name is looked up on the image's PATH; the
    image's MPI version against the host's gives a warning across major versions."""
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    img = make_image("syn", mpis=("openmpi",))
    img.rootfs = _rootfs(tmp_path, "/usr/bin/model")
    img.meta = {"mpi": {"openmpi": {"version": "3.1.6"}}}
    p = plan(RunRequest("model", ["-c", "x"], mode="hybrid", image="syn", mpi="openmpi", workdir=str(tmp_path)),
             host=FakeHost(images={"syn": img}))
    assert p.tag.startswith(f"nm{os.getpid()}x") and len(p.tag) == len(f"nm{os.getpid()}x") + 6
    assert p.argv == ["/usr/bin/mpirun.openmpi", "-np", "2", "/usr/bin/ch-run", "--join-ct=2", f"--join-tag={p.tag}",
                      f"--bind={tmp_path}:/nm/work", "--set-env=PWD=/nm/work", "--set-env=OMP_NUM_THREADS=1",
                      "--cd=/nm/work", str(img.rootfs), "--", "/usr/bin/model", "-c", "x"]
    assert p.notes == [
        "warning: host Open MPI 4.1.4 launching container Open MPI 3.1.6: different major versions rarely wire up; "
        "prefer bind mode",
        "hybrid: container openmpi 3.1.6 under host launcher /usr/bin/mpirun.openmpi",
        f"containers: {tmp_path} mounted read-write at /nm/work, ranks start there"]


def test_plan_hybrid_refusals(tmp_path):
    img = make_image("syn", mpis=("mpich",))
    img.rootfs = _rootfs(tmp_path, "/usr/bin/model")
    host = FakeHost(images={"syn": img})
    with pytest.raises(NearmetalError) as e:
        plan(RunRequest("model", mode="hybrid", image="syn", mpi="openmpi"), host=host)
    assert str(e.value) == "hybrid mode needs openmpi inside the image, but image 'syn' has mpich"
    with pytest.raises(NearmetalError) as e:
        plan(RunRequest("/opt/none", mode="hybrid", image="syn", mpi="mpich"), host=host)
    assert str(e.value) == "program not found in image 'syn': /opt/none"
    with pytest.raises(NearmetalError) as e:
        plan(RunRequest("rel/model", mode="hybrid", image="syn", mpi="mpich"), host=host)
    assert str(e.value).startswith("program path inside the image must be absolute: rel/model (a container starts")
    # the way out in argv words that `run`, `bench` and a study's command take alike (not a study key)
    assert "image build --recipe" in str(e.value) and str(e.value).endswith("sh -c rel/model; a script: sh rel/model)")


def test_plan_mpmd_shares_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    more = RunRequest("/bin/sh", ranks=1, workdir=None)
    p = plan(RunRequest("/bin/sh", mpi="mpich", ranks=1, workdir=str(tmp_path)), [more], host=FakeHost())
    assert more.workdir == str(tmp_path) and [c.workdir for c in p.components] == [str(tmp_path)] * 2
    assert p.argv == ["/usr/bin/mpiexec.hydra", "-n", "1", "-env", "OMP_NUM_THREADS", "1", "/bin/sh",
                      ":", "-n", "1", "-env", "OMP_NUM_THREADS", "1", "/bin/sh"]


def test_a_kernel_or_a_program_of_no_mpi_in_an_image_takes_the_profiles_order_among_its_mpis():
    """Without --mpi, in a container, a kernel or a program that links no MPI (`sh -c ./app`)
    takes the first MPI in the profiles' order that the image holds and the host can launch:
    Open MPI in an image of both, as natively (the image's first listed, MPICH, made a script
    starting an Open MPI program run as 1-rank jobs), and MPICH in an MPICH-only image (kernels
    asked for Open MPI there and failed; both found by new users)."""
    both = make_image("both", mpis=("mpich", "openmpi"))
    mpich_only = make_image("mp", mpis=("mpich",))
    host = FakeHost(images={"both": both, "mp": mpich_only}, image_abi=None)
    for program in ("nm-mpi-info", "sh"):
        [c] = resolve(req("hybrid", program=program, image="both"), host=host)
        assert c.installation["family"] == "openmpi", program
        [c] = resolve(req("hybrid", program=program, image="mp"), host=host)
        assert c.installation["family"] == "mpich", program
    only_mpich_here = FakeHost(mpis=("mpich",), images={"both": both}, image_abi=None)
    [c] = resolve(req("hybrid", program="nm-mpi-info", image="both"), host=only_mpich_here)
    assert c.installation["family"] == "mpich"  # the host has no Open MPI launcher to start it with
