"""How nearmetal asks nm-supervise for what issue 26 needs: build commands chrooted in a
mount namespace of their own (--chroot), debootstrap's mounts kept private
(--private-mounts), and every plan's launcher marked as one (--launcher), so a daemon its
ranks leave ends with them. The behaviour itself: tests/test_hostile_lifetime.py."""

from pathlib import Path

import pytest

from nearmetal import supervise
from nearmetal.image import chroot

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _binary(monkeypatch):
    monkeypatch.setattr(supervise, "binary", lambda: "/t/nm-supervise")


def test_a_chrooted_build_command_gets_its_own_mounts():
    assert chroot.supervised(["apt-get", "update"], Path("/i/.x.build-1/rootfs")) == [
        "/t/nm-supervise", "--die-with-parent", "--chroot", "/i/.x.build-1/rootfs", "--", "apt-get", "update"]


def test_a_relative_rootfs_is_made_absolute(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    argv = chroot.supervised(["true"], Path("rootfs"))
    assert argv[argv.index("--chroot") + 1] == str(tmp_path / "rootfs")


def test_debootstrap_mounts_privately_and_host_commands_only_die_with_nearmetal():
    assert chroot.supervised(["debootstrap", "x"], private_mounts=True) == [
        "/t/nm-supervise", "--die-with-parent", "--private-mounts", "--", "debootstrap", "x"]
    assert chroot.supervised(["cp", "-a", "a", "b"]) == ["/t/nm-supervise", "--die-with-parent", "--", "cp", "-a", "a", "b"]


def test_a_missing_host_tool_is_a_one_line_error(tmp_path):
    log = chroot.BuildLog(tmp_path / "log", truncate=True)
    with pytest.raises(chroot.NearmetalError, match=r"^copying failed: nm-no-such-tool is not installed$"):
        chroot.run(["nm-no-such-tool", "x"], log, "copying")
