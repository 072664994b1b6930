"""run's warning about container ranks' arguments naming host files the container will not
see (run.unseen_host_files): what each runtime shows at the same path, --workdir, the image's
own files. Files under tmp_path stand for the host and the image (tmp_path is under /tmp,
which every runtime shows: the tests pass always_seen without it); nothing is started."""

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from nearmetal.run import unseen_host_files as _unseen
from nearmetal.runtimes import get

pytestmark = pytest.mark.unit


def unseen_host_files(components, cwd):
    return _unseen(components, cwd=cwd, always_seen=("/dev/shm",))


@pytest.fixture
def host(tmp_path):
    cwd = tmp_path / "case"
    cwd.mkdir()
    (cwd / "input.nml").write_text("&nml /\n")
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "app.conf").write_text("")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "app.conf").write_text("")  # on the host too, and in the image
    return SimpleNamespace(cwd=str(cwd), rootfs=rootfs, tmp=tmp_path)


def component(host, args, runtime="charliecloud", runtime_args=(), workdir=None, mode="hybrid"):
    return SimpleNamespace(in_container=mode != "native", mode=mode, runtime=get(runtime) if mode != "native" else None,
                           runtime_args=tuple(runtime_args), args=tuple(args), workdir=workdir,
                           image=SimpleNamespace(rootfs=host.rootfs))


def test_a_relative_input_in_the_launch_directory_is_unseen_without_workdir(host):
    warned = unseen_host_files([component(host, ["input.nml", "-o", "out"])], cwd=host.cwd)
    assert warned == ["warning: 'input.nml' is a file on the host that the hybrid ranks in the container will not "
                      "see at that path: give --workdir DIR (mounted read-write at /nm/work, where the ranks start) "
                      "with it inside"]
    assert unseen_host_files([component(host, ["input.nml"], workdir=host.cwd)], cwd=host.cwd) == []
    assert unseen_host_files([component(host, ["input.nml"], mode="native")], cwd=host.cwd) == []


def test_an_absolute_host_path(host):
    path = os.path.join(host.cwd, "input.nml")
    assert len(unseen_host_files([component(host, [path])], cwd=host.cwd)) == 1
    under = unseen_host_files([component(host, [path], workdir=host.cwd)], cwd=host.cwd)
    assert under and under[0].endswith("the ranks see it as /nm/work/input.nml")
    # the image has its own file at that path: nothing to say
    inside = str(host.tmp / "etc" / "app.conf")
    rel = Path(inside).relative_to("/")
    (host.rootfs / rel).parent.mkdir(parents=True, exist_ok=True)
    (host.rootfs / rel).write_text("")
    assert unseen_host_files([component(host, [inside])], cwd=host.cwd) == []


def test_apptainer_sees_the_current_directory_and_home_unless_contained(host):
    assert unseen_host_files([component(host, ["input.nml"], runtime="apptainer")], cwd=host.cwd) == []
    contained = component(host, ["input.nml"], runtime="apptainer", runtime_args=["--contain"])
    assert len(unseen_host_files([contained], cwd=host.cwd)) == 1


def test_options_missing_files_and_tmp_are_left_alone(host, tmp_path):
    assert _unseen([component(host, ["-i", "--x=input.nml", "nonexistent.nml", "/tmp", "/dev/shm"])],
                   cwd=host.cwd) == []  # every runtime binds /tmp and /dev/shm
