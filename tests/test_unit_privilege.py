"""run --user NAME (privilege.py, docs/privilege.md) without a machine: the account's checks and
their one-line messages, what each runtime declares it can start unprivileged and the
refusals derived from those declarations, the view of the file system a job gets (masks and
shows), nm-supervise's options and the plan's environment. The real runs (ranks' uids, podman's
pause process, the refusals' exit status) are tests/test_privilege.py."""

import os
import stat

import pytest

from nearmetal import privilege, supervise
from nearmetal.cli import fast_parse_run
from nearmetal.cli_parser import build_parser
from nearmetal.errors import NearmetalError
from nearmetal.models import ModelPlan
from nearmetal.privilege import Account
from nearmetal.runtimes import RUNTIMES
from nearmetal.runtimes.base import Runtime
from test_unit_compose import FakeHost, machine, make_image, req  # noqa: F401  (machine: autouse fixture)

pytestmark = pytest.mark.unit

NM = Account("nmuser", 999, 995, (995, 27), "/home/nmuser")


def st(mode, uid=0, gid=0, kind=stat.S_IFDIR):
    return os.stat_result((kind | mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))


class FakeFacts:
    """Modes of the paths asked about (anything not listed: a 0755 root directory), files' text."""

    def __init__(self, modes=None, files=None):
        self.modes = dict(modes or {})
        self.files = {"/proc/sys/user/max_user_namespaces": "15000\n", **(files or {})}

    def stat(self, path):
        found = self.modes.get(path, st(0o755))
        return found if found != "missing" else None

    def read(self, path):
        return self.files.get(path)


ROOT_HOME = {"/root": st(0o700)}  # Debian's /root
SUBIDS = {"/etc/subuid": "other:100000:65536\nnmuser:165536:65536\n", "/etc/subgid": "999:165536:65536\n"}


# -- the account ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["nmuser", "_svc", "a.b-c_d", "Bob", "x" * 32])
def test_account_names_accepted(name):
    privilege.check_name(name)


@pytest.mark.parametrize("name, message", [
    ("1000", "--user 1000: give the account's name, not a uid"),
    ("a b", "--user 'a b': not an account name"),
    ("-n", "--user '-n': not an account name"),
    ("x" * 33, "not an account name"),
    ("", "not an account name"),
    ("9lives", "not an account name"),
    ("a\nb", "--user 'a\\nb': not an account name"),
])
def test_account_names_refused_in_one_line(name, message):
    with pytest.raises(NearmetalError) as e:
        privilege.check_name(name)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_account_must_exist_not_be_root_and_nearmetal_must_be_root():
    accounts = {"nmuser": NM, "toor": Account("toor", 0, 0, (), "/root")}
    with pytest.raises(NearmetalError, match=r"^--user nosuch: no such account \(create one with: "
                                             r"bash scripts/setup.sh --create-user nosuch\)$"):
        privilege.account("nosuch", find=accounts.get, euid=0)
    with pytest.raises(NearmetalError, match=r"^--user toor: toor is uid 0 \(root\): to run as root, give no --user$"):
        privilege.account("toor", find=accounts.get, euid=0)
    with pytest.raises(NearmetalError, match=r"^--user needs root; run as nmuser instead$"):
        privilege.account("nmuser", find=accounts.get, euid=1000)
    assert privilege.account("nmuser", find=accounts.get, euid=0) is NM


def test_an_account_says_who_it_is_to_the_ranks_and_to_nm_supervise():
    assert NM.env() == {"HOME": "/home/nmuser", "USER": "nmuser", "LOGNAME": "nmuser"}
    assert NM.groups == (27, 995) and NM.as_option() == "999:995:27,995"
    assert Account("solo", 5, 6).as_option() == "5:6:6"  # the primary group is always in the list


def test_permissions_are_read_as_the_kernel_reads_mode_bits():
    assert privilege.permits(st(0o700, uid=999), NM, "rwx")
    assert not privilege.permits(st(0o077, uid=999), NM, "r")  # the owner class decides, not the others
    assert privilege.permits(st(0o750, gid=27), NM, "rx") and not privilege.permits(st(0o750, gid=27), NM, "w")
    assert privilege.permits(st(0o711), NM, "x") and not privilege.permits(st(0o711), NM, "r")


# -- what an account needs, and refusals derived from the runtimes' declarations ----------------

def test_every_runtime_declares_what_it_starts_unprivileged_with_known_needs():
    from nearmetal.image.formats import FORMATS

    declared = {cls.name: cls.formats for cls in RUNTIMES.all()}
    assert set(declared) >= {"charliecloud", "bwrap", "podman", "apptainer"}
    for name, formats in declared.items():
        assert formats, f"{name} declares nothing: it would be refused whatever the image"
        for fmt, needs in formats.items():
            assert fmt in FORMATS.names(), (name, fmt)
            assert set(needs) <= set(privilege.NEEDS), (name, needs)


def test_needs_fuse_userns_subids():
    fuse_0600 = FakeFacts({"/dev/fuse": st(0o600, kind=stat.S_IFCHR)})
    assert privilege.NEEDS["fuse"](NM, fuse_0600) == (
        "/dev/fuse is 0600 root, so nmuser cannot mount FUSE file systems "
        "(its image files are mounted through FUSE when unprivileged)")
    assert privilege.NEEDS["fuse"](NM, FakeFacts({"/dev/fuse": st(0o666, kind=stat.S_IFCHR)})) is None
    assert "there is no /dev/fuse" in privilege.NEEDS["fuse"](NM, FakeFacts({"/dev/fuse": "missing"}))
    assert privilege.NEEDS["userns"](NM, FakeFacts()) is None
    off = FakeFacts(files={"/proc/sys/user/max_user_namespaces": "0\n"})
    assert "user namespaces are disabled" in privilege.NEEDS["userns"](NM, off)
    debian_off = FakeFacts(files={"/proc/sys/kernel/unprivileged_userns_clone": "0"})
    assert "unprivileged_userns_clone is 0" in privilege.NEEDS["userns"](NM, debian_off)
    assert privilege.NEEDS["subids"](NM, FakeFacts(files=SUBIDS)) is None  # by name in one, by uid in the other
    missing = privilege.NEEDS["subids"](NM, FakeFacts(files={"/etc/subuid": SUBIDS["/etc/subuid"]}))
    assert missing == ("nmuser has no range in /etc/subgid (its user namespace maps the image's users through "
                       "them): bash scripts/setup.sh --create-user nmuser adds them")
    assert privilege.subid_ranges("nmuser:1:2\nbad line\nnmuser:x:3\n999:7:8\n", NM) == [(1, 2), (7, 8)]


class Unprivileged(Runtime):
    """A runtime known only to this test: refusals come from its declaration, not its name."""
    binary = "xrun"
    formats = {"dir": ("userns",), "sif": ("userns", "fuse")}

    def wrap(self, spec):
        return ["xrun", str(spec.image.rootfs), "--", *spec.argv]


@pytest.mark.parametrize("fmt, facts, message", [
    ("dir", FakeFacts(), None),
    ("sif", FakeFacts({"/dev/fuse": st(0o666, kind=stat.S_IFCHR)}), None),
    ("sif", FakeFacts({"/dev/fuse": st(0o600, kind=stat.S_IFCHR)}),
     "xrun cannot start SIF files as nmuser: /dev/fuse is 0600 root, so nmuser cannot mount FUSE file systems"),
    ("squashfs", FakeFacts(), "xrun cannot start SquashFS files as an unprivileged account "
                              "(it starts directory images, SIF files that way)"),
    ("dir", FakeFacts(files={"/proc/sys/user/max_user_namespaces": "0"}),
     "xrun cannot start directory images as nmuser: user namespaces are disabled"),
])
def test_refusals_follow_the_declaration(fmt, facts, message):
    why = privilege.runtime_problem(Unprivileged(), fmt, NM, facts)
    assert why == message if message is None else why.startswith(message)


def test_a_runtime_that_declares_nothing_needs_root():
    class RootOnly(Unprivileged):
        formats = {}

    assert privilege.runtime_problem(RootOnly(), "dir", NM, FakeFacts()) == (
        "xrun cannot start directory images as an unprivileged account (it needs root)")


def components(mode="hybrid", runtime="charliecloud", host=None, **kw):
    from nearmetal.resolve import resolve

    return resolve(req(mode=mode, runtime=runtime if mode != "native" else None, user="nmuser", **kw),
                   host=host or AccountHost())


class AccountHost(FakeHost):
    """FakeHost with the account nmuser, nearmetal as root and this machine's facts made up."""

    def __init__(self, facts=None, **kw):
        super().__init__(**kw)
        self._facts = facts or FakeFacts({**ROOT_HOME, "/dev/fuse": st(0o600, kind=stat.S_IFCHR)}, SUBIDS)

    def account(self, name):
        return NM if name == "nmuser" else None

    def euid(self):
        return 0

    def facts(self):
        return self._facts


@pytest.mark.parametrize("runtime, image, message", [
    ("charliecloud", "nm-test", None),
    ("bwrap", "nm-test", None),
    ("podman", "nm-test", None),
    ("apptainer", "nm-test", None),
    ("charliecloud", "/img/nm-test/nm-test.sqfs",
     "--user nmuser: ch-run cannot start SquashFS files as nmuser: /dev/fuse is 0600 root, so nmuser cannot mount "
     "FUSE file systems (its image files are mounted through FUSE when unprivileged); run as root (no --user) or "
     "choose another image or runtime"),
    ("bwrap", "/img/nm-test/nm-test.sqfs", "--user nmuser: bwrap cannot start SquashFS files as an unprivileged account"),
])
def test_each_runtime_and_format_as_the_account(runtime, image, message):
    host = AccountHost()
    cs = components(runtime=runtime, image=image, host=host)
    assert cs[0].account is NM and cs[0].runtime.account is NM
    if message is None:
        privilege.check(cs, NM, host.facts(), "/work")
    else:
        with pytest.raises(NearmetalError) as e:
            privilege.check(cs, NM, host.facts(), "/work")
        assert str(e.value).startswith(message)


def test_podman_without_subordinate_ids_is_refused():
    host = AccountHost(FakeFacts(ROOT_HOME, {}))
    with pytest.raises(NearmetalError, match=r"^--user nmuser: podman cannot start podman images as nmuser: nmuser "
                                             r"has no range in /etc/subuid and /etc/subgid"):
        privilege.check(components(runtime="podman", host=host), NM, host.facts(), "/work")


def test_only_local_jobs_on_the_host_network_from_a_reachable_directory():
    host = AccountHost()
    with pytest.raises(NearmetalError, match="^--user runs jobs on this machine only"):
        privilege.check(components(mode="native", mpi="openmpi", scheduler="slurm", host=host), NM, host.facts(), "/w")
    cs = components(mode="native", mpi="openmpi", host=host)
    cs[0].network = "isolated"
    with pytest.raises(NearmetalError, match="^--user with network isolated is not supported"):
        privilege.check(cs, NM, host.facts(), "/w")
    with pytest.raises(NearmetalError, match=r"^--user nmuser: the current directory /root/proj is not reachable by "
                                             r"nmuser: give --workdir DIR \(a directory nmuser can write\)$"):
        privilege.check(components(mode="native", mpi="openmpi", host=host), NM, host.facts(), "/root/proj")


# -- the job's view of the file system ------------------------------------------------------------

HOME = "/root/.cache/nearmetal"


def test_the_nearmetal_home_under_root_is_shown_read_only_at_its_own_path():
    assert privilege.view(NM, [(HOME, False)], FakeFacts(ROOT_HOME)) == (["/root"], [(HOME, False)])
    assert privilege.view(NM, [("/var/cache/nearmetal", False)], FakeFacts(ROOT_HOME)) == ([], [])  # reachable


def test_a_working_directory_inside_a_read_only_show_is_shown_read_write_over_it():
    facts = FakeFacts({**ROOT_HOME, f"{HOME}/work": st(0o755, uid=999)})
    masks, shows = privilege.view(NM, [(f"{HOME}/work", True), (HOME, False)], facts)
    assert masks == ["/root"] and shows == [(HOME, False), (f"{HOME}/work", True)]  # outer first
    assert privilege.view(NM, [("/srv/w", True)], FakeFacts({"/srv/w": st(0o700, uid=999)})) == ([], [])


def test_what_the_account_could_not_use_even_then_is_a_one_line_error_naming_the_fix():
    with pytest.raises(NearmetalError, match=r"^--user nmuser: /root/.cache/nearmetal is not readable by nmuser "
                                             r"\(0700 root\): make it readable by nmuser, or run as root"):
        privilege.view(NM, [(HOME, False)], FakeFacts({**ROOT_HOME, HOME: st(0o700)}))
    with pytest.raises(NearmetalError, match=r"^--user nmuser: /w is not writable by nmuser \(0755 root\)"):
        privilege.view(NM, [("/w", True)], FakeFacts())
    with pytest.raises(NearmetalError, match=r"^--user nmuser: nmuser cannot reach /root/.cache/nearmetal/images/x: "
                                             r"/root/.cache/nearmetal/images is 0700 root \(make it searchable"):
        privilege.view(NM, [(HOME, False), (f"{HOME}/images/x", False)],
                       FakeFacts({**ROOT_HOME, f"{HOME}/images": st(0o700)}))


def test_wanted_paths_name_the_home_only_when_the_launch_does():
    cs = components(mode="native", mpi="openmpi", host=AccountHost())
    assert privilege.wanted_paths(cs, ["/usr/bin/mpirun", "/usr/bin/id"], {}, HOME) == []
    assert privilege.wanted_paths(cs, ["/usr/bin/mpirun", f"{HOME}/host/openmpi/bin/nm-latency"], {}, HOME) == [
        (HOME, False)]
    hybrid = components(runtime="bwrap", host=AccountHost())  # the image /img/nm-test/rootfs
    assert privilege.wanted_paths(hybrid, [], {"CONTAINERS_CONF": f"{HOME}/podman/c.conf"}, HOME) == [
        (HOME, False), ("/img/nm-test/rootfs", False)]


def test_an_image_inside_the_shown_home_is_reached_through_it_or_refused_with_the_directory_to_fix():
    image = f"{HOME}/images/x/rootfs"
    assert privilege.view(NM, [(HOME, False), (image, False)], FakeFacts(ROOT_HOME)) == (["/root"], [(HOME, False)])


def test_nm_supervise_options_and_argv():
    options = privilege.supervise_options(NM, ["/root"], [(HOME, False), ("/root/w", True)])
    assert options == ["--as", "999:995:27,995", "--mask", "/root", "--show", HOME, "--show-rw", "/root/w"]
    assert privilege.supervise_options(NM) == ["--as", "999:995:27,995"]


def test_supervise_wrap_puts_the_options_before_the_job(monkeypatch):
    monkeypatch.setattr(supervise, "binary", lambda: "/t/nm-supervise")
    assert supervise.wrap(["mpirun", "x"], die_with_parent=False, options=["--as", "1:2:2"]) == [
        "/t/nm-supervise", "--as", "1:2:2", "--", "mpirun", "x"]
    assert supervise.wrap(["mpirun"]) == ["/t/nm-supervise", "--die-with-parent", "--", "mpirun"]


def test_the_account_environment_drops_roots_own_variables():
    env = privilege.environ(NM, {"HOME": "/root", "XDG_RUNTIME_DIR": "/run/user/0", "OMPI_ALLOW_RUN_AS_ROOT": "1",
                                 "PATH": "/usr/bin"})
    assert env == {"HOME": "/home/nmuser", "USER": "nmuser", "LOGNAME": "nmuser", "PATH": "/usr/bin"}


# -- the plan -----------------------------------------------------------------------------------

@pytest.fixture
def planned(monkeypatch):
    """run.plan() as the account, models written by hand, the image under a 0700 /img."""
    import nearmetal.models as models

    monkeypatch.setattr(models, "prepare", lambda mode, c: ModelPlan([f"/opt/nearmetal/{c.installation['family']}/bin/nm-x"]))
    monkeypatch.setattr(os, "getcwd", lambda: "/work")
    for key in privilege.ROOT_ONLY_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/0")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    facts = FakeFacts({"/img": st(0o700), "/dev/fuse": st(0o600, kind=stat.S_IFCHR)}, SUBIDS)

    def plan(**kw):
        from nearmetal.run import plan as make

        return make(req(mode="hybrid", mpi="openmpi", user="nmuser", **kw), host=AccountHost(facts))
    return plan


def test_the_plan_runs_the_launcher_as_the_account(planned):
    p = planned(runtime="charliecloud")
    assert p.account is NM
    assert p.supervise_options == ["--as", "999:995:27,995", "--mask", "/img", "--show", "/img/nm-test/rootfs"]
    assert {k: p.env_delta[k] for k in ("HOME", "USER", "LOGNAME")} == NM.env()  # ch-run's USER is the account's
    assert p.unset == ("XDG_RUNTIME_DIR", "OMPI_ALLOW_RUN_AS_ROOT")
    env = p.environ()
    assert "XDG_RUNTIME_DIR" not in env and env["USER"] == "nmuser"
    text = p.describe()
    assert "# as nmuser (uid 999, gid 995): the launcher and every rank" in text
    assert "covers /img with an empty tmpfs and shows /img/nm-test/rootfs (read-only)" in text
    assert "# unset: XDG_RUNTIME_DIR OMPI_ALLOW_RUN_AS_ROOT" in text
    assert "the working directory /work is not writable by nmuser" in text


def test_unprivileged_ranks_in_namespaces_of_their_own_get_the_cross_namespace_settings(planned):
    vader = "OMPI_MCA_btl_vader_single_copy_mechanism"
    assert vader in " ".join(planned(runtime="bwrap").argv)  # bwrap: a user namespace per rank
    assert vader in " ".join(planned(runtime="apptainer").argv)
    assert vader not in " ".join(planned(runtime="charliecloud").argv)  # ch-run --join: one per node


def test_rootless_podman_uses_the_accounts_storage_and_keeps_its_uid(planned):
    argv = planned(runtime="podman").argv
    joined = " ".join(argv)
    assert "--root /home/nmuser/.cache/nearmetal/podman/root --runroot /home/nmuser/.cache/nearmetal/podman/runroot" \
        in joined
    assert "--userns=keep-id --tmpfs /dev/mqueue" in joined and "--userns=host" not in joined
    assert "localhost/nearmetal-nm-test:latest" in argv  # the test image has no digest
    image = make_image()
    image.meta["digest"] = "0123456789abcdef0123"
    from nearmetal.runtimes.podman import account_reference

    assert account_reference(image) == "localhost/nearmetal-nm-test:0123456789abcdef"


def test_the_caller_plan_is_unchanged_without_user(monkeypatch):
    import nearmetal.models as models
    from nearmetal.run import plan

    monkeypatch.setattr(models, "prepare", lambda mode, c: ModelPlan(["/opt/x"]))
    p = plan(req(mode="hybrid", mpi="openmpi", runtime="bwrap"), host=FakeHost())
    assert p.account is None and p.supervise_options == [] and p.unset == ()
    assert not any(n.startswith("as ") for n in p.notes)


def test_both_parsers_take_user():
    fast = fast_parse_run(["--user", "nmuser", "--mode", "hybrid", "--", "prog"])
    slow = build_parser("run").parse_args(["run", "--user", "nmuser", "--mode", "hybrid", "--", "prog"])
    assert fast.user == slow.user == "nmuser"
    assert fast_parse_run(["--", "prog"]).user is None
    assert build_parser("bench").parse_args(["bench", "latency", "--user", "nmuser"]).user == "nmuser"


def test_the_shared_library_directory_lets_another_account_load_by_name(tmp_path):
    built = tmp_path / "lib.so"
    built.write_bytes(b"\x7fELF")
    target = supervise.place_shared(str(built), "nm-unit-privilege")
    try:
        assert stat.S_IMODE(os.stat(os.path.dirname(target)).st_mode) == 0o711  # searchable, not listable
        assert stat.S_IMODE(os.stat(target).st_mode) == 0o555
    finally:
        os.unlink(target)


def test_a_resolved_component_without_user_has_no_account():
    from nearmetal.resolve import resolve

    c = resolve(req(mode="hybrid", runtime="bwrap"), host=FakeHost())[0]
    assert c.account is None and c.runtime.account is None


# -- the study dimension `user` ---------------------------------------------------------------

def test_user_variants_are_named_and_compared_with_the_callers_runs():
    from conftest import planned_variants
    from nearmetal.study.plan.plan import baseline_of, cells, variant_id

    cfg, ids = planned_variants('user = ["", "nmuser"]')
    assert ids == ["hybrid/charliecloud/mpich/default", "hybrid/charliecloud/mpich/default+as-nmuser",
                   "native/mpich", "native/mpich+as-nmuser"]
    as_account = next(c.variant for c in cells(cfg) if variant_id(c.variant) == "native/mpich+as-nmuser")
    assert as_account["user"] == "nmuser" and variant_id(baseline_of(cfg, as_account)) == "native/mpich"
    # off by default: a study that does not name it keeps its ids (and stored variants)
    _, plain = planned_variants("")
    assert plain == ["hybrid/charliecloud/mpich/default", "native/mpich"]


def test_a_named_variant_runs_as_its_account():
    from nearmetal.study.plan.study_file import parse
    from nearmetal.study.plan.plan import cells, variant_id

    cfg = parse('[study]\nname = "a"\nrepetitions = 2\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n'
                '[[variant]]\nname = "unprivileged"\nmode = "hybrid"\nruntime = "apptainer"\nmpi = "mpich"\n'
                'user = "nmuser"\n[[benchmark]]\nkernel = "bw"\n')
    named = next(c.variant for c in cells(cfg) if c.variant.get("name"))
    assert named["user"] == "nmuser" and variant_id(named) == "unprivileged"


@pytest.mark.parametrize("value, message", [
    ('["1000"]', r"matrix\.user\[0\]: give the account's name, not a uid"),
    ('["a b"]', r"matrix\.user\[0\]: not an account name"),
    ('[]', r"matrix\.user: .*non-empty"),
])
def test_bad_account_names_in_a_study_are_refused_by_key(value, message):
    from nearmetal.study.plan.study_file import parse

    with pytest.raises(NearmetalError, match=message) as e:
        parse(f'[study]\nname = "a"\nrepetitions = 2\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\nuser = {value}\n'
              '[[benchmark]]\nkernel = "bw"\n')
    assert "\n" not in str(e.value)


def test_user_with_a_batch_scheduler_is_refused_in_a_study():
    from nearmetal.study.plan.study_file import parse

    with pytest.raises(NearmetalError, match="user act on this machine .*its accounts"):
        parse('[study]\nname = "a"\nrepetitions = 2\nscheduler = "slurm"\n[matrix]\nmode = ["native"]\n'
              'mpi = ["mpich"]\nuser = ["", "nmuser"]\n[[benchmark]]\nkernel = "startup"\n')


def test_a_program_run_directory_is_handed_to_the_account_without_following_anything(tmp_path, monkeypatch):
    """Staged copies and the directory become the account's, the directory last; a symbolic
    link inside is changed itself (never followed), a file with other hard links is left, and a
    run directory that is a symbolic link is refused; without `user` nothing is handed over."""
    from nearmetal.study.config import program

    given = []
    monkeypatch.setattr(privilege, "account", lambda name: NM)
    monkeypatch.setattr(os, "chown", lambda name, u, g, dir_fd=None, follow_symlinks=True:
                        given.append((name, u, g, follow_symlinks)))
    monkeypatch.setattr(os, "fchown", lambda fd, u, g: given.append(("<top>", u, g, None)))
    src = tmp_path / "topol.tpr"
    src.write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("root's")
    program.stage(str(tmp_path / "run"), [str(src)], user="nmuser")
    assert given == [("topol.tpr", 999, 995, False), ("<top>", 999, 995, None)]
    given.clear()
    run = tmp_path / "run"
    os.symlink(outside, run / "link")
    os.link(outside / "secret", run / "hard")
    (run / "sub").mkdir()
    (run / "sub" / "out").write_text("")
    program.hand_over(str(run), "nmuser", tree=True)
    assert ("link", 999, 995, False) in given and all(name not in ("hard", "secret") for name, *_ in given)
    assert given.index(("out", 999, 995, False)) < given.index(("sub", 999, 995, False)) and given[-1][0] == "<top>"
    given.clear()
    program.hand_over(str(run), "nmuser")                            # a kernel's directory: itself only
    assert given == [("<top>", 999, 995, None)]
    os.symlink(outside, tmp_path / "linked-run")
    with pytest.raises(NearmetalError, match=r"run directory .*linked-run: .*a symbolic link is refused"):
        program.hand_over(str(tmp_path / "linked-run"), "nmuser")
    given.clear()
    program.stage(str(tmp_path / "run"), [str(src)], user=None)     # the caller's own runs: nothing handed over
    assert given == []


def test_user_does_not_combine_with_an_isolated_network_or_the_tracer():
    from nearmetal.study.plan.study_file import parse

    head = '[study]\nname = "a"\nrepetitions = 2\n[matrix]\nmode = ["native"]\nmpi = ["mpich"]\n'
    with pytest.raises(NearmetalError, match=r"benchmark\[0\]: variant native/mpich\+isolated\+as-nmuser: user and "
                                             r"network \"isolated\" do not combine"):
        parse(head + 'user = ["nmuser"]\nnetwork = ["host", "isolated"]\n[baseline]\nuser = "nmuser"\n'
              '[[benchmark]]\nkernel = "bw"\n')
    with pytest.raises(NearmetalError, match=r"benchmark\[0\]\.trace: variant native/mpich\+as-nmuser runs as nmuser"):
        parse(head + 'user = ["", "nmuser"]\n[[benchmark]]\nkernel = "iobench"\ntrace = true\n')


def test_a_study_all_as_the_account_names_its_baselines_account():
    from conftest import planned_variants
    from nearmetal.study.plan.plan import baseline_of, cells, variant_id

    cfg, ids = planned_variants('user = ["nmuser"]', extra='[baseline]\nuser = "nmuser"\n')
    assert ids == ["hybrid/charliecloud/mpich/default+as-nmuser", "native/mpich+as-nmuser"]
    hybrid = next(c.variant for c in cells(cfg) if c.variant["mode"] == "hybrid")
    assert variant_id(baseline_of(cfg, hybrid)) == "native/mpich+as-nmuser"
    with pytest.raises(NearmetalError, match=r"baseline: 'native/mpich', the baseline of variant "):
        planned_variants('user = ["nmuser"]')  # as the caller by default: not in this matrix
