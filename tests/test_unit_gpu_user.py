"""`--gpus` with `--user`: it works when the account can open the GPUs' device nodes, and is
refused in one line naming the node, its mode and group, and the fix when it cannot (a site
that limits /dev/nvidia* to a group). The whole plan is made (run.plan) on the fake two-GPU
machine (tests/gpu_tree.py) with the device nodes' modes given through privilege.Facts,
the seam the other --user checks read this machine through."""

import os
import stat
from types import SimpleNamespace

import pytest

import gpu_tree
from nearmetal.errors import NearmetalError
from nearmetal.privilege import Account, Facts, check_devices
from nearmetal.run import RunRequest, plan
from test_unit_gpu_compose import GpuHost, image_at, machine  # noqa: F401

pytestmark = pytest.mark.unit

NMUSER = Account("nmuser", 1000, 1000, groups=(), home="/home/nmuser")
VIDEO = 44  # Debian's video group


class NodeModes(Facts):
    """This machine, but the NVIDIA device nodes with the given (mode, gid), owned by root."""

    def __init__(self, modes):
        self.modes = modes

    def stat(self, path):
        if path in self.modes:
            mode, gid = self.modes[path]
            return SimpleNamespace(st_mode=stat.S_IFCHR | mode, st_uid=0, st_gid=gid)
        return SimpleNamespace(st_mode=stat.S_IFDIR | 0o755, st_uid=0, st_gid=0)  # reachable, as a home would be


class AccountHost(GpuHost):
    def __init__(self, image, root, facts):
        super().__init__(image, root)
        self._facts = facts

    def account(self, name):
        return NMUSER if name == "nmuser" else None

    def euid(self):
        return 0

    def facts(self):
        return self._facts


def nodes(mode, gid=0, uvm_mode=None):
    out = {f"/dev/{n}": (mode, gid) for n in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm-tools")}
    out["/dev/nvidia-uvm"] = (uvm_mode if uvm_mode is not None else mode, gid)
    return out


def planned(machine, facts, gpus="all"):  # noqa: F811
    home, rootfs, root = machine
    req = RunRequest("/bin/true", mode="native", mpi="openmpi", gpus=gpus, user="nmuser")
    return plan(req, host=AccountHost(image_at(rootfs), root, facts))


def test_an_account_that_can_open_the_device_nodes_gets_its_gpus(machine, monkeypatch):  # noqa: F811
    monkeypatch.chdir("/")
    p = planned(machine, NodeModes(nodes(0o666)))
    assert p.account is NMUSER and "nm-gpuvis" in " ".join(p.argv)
    assert any(n.startswith("gpu: each local rank sees one GPU") for n in p.notes)


def test_a_group_member_may_open_group_only_nodes(machine, monkeypatch):  # noqa: F811
    monkeypatch.chdir("/")
    monkeypatch.setattr(NMUSER, "groups", (1000, VIDEO))
    p = planned(machine, NodeModes(nodes(0o660, VIDEO)))
    assert p.account is NMUSER


def test_a_node_the_account_cannot_open_is_refused_in_one_line(machine, monkeypatch):  # noqa: F811
    monkeypatch.chdir("/")
    with pytest.raises(NearmetalError) as e:
        planned(machine, NodeModes(nodes(0o666, VIDEO, uvm_mode=0o660)), gpus="1,")
    assert str(e.value) == ("--gpus with --user nmuser: /dev/nvidia-uvm is 0660 root (group video), so nmuser cannot "
                            "open it: add nmuser to group video, or run as root (no --user)")


def test_only_the_selected_gpus_nodes_are_asked(machine, monkeypatch):  # noqa: F811
    monkeypatch.chdir("/")
    modes = nodes(0o666)
    modes["/dev/nvidia0"] = (0o600, 0)  # GPU 0 is not asked for
    assert planned(machine, NodeModes(modes), gpus="1,").account is NMUSER
    with pytest.raises(NearmetalError) as e:
        planned(machine, NodeModes(modes), gpus="all")
    assert str(e.value) == ("--gpus with --user nmuser: /dev/nvidia0 is 0600 root (group root), so nmuser cannot open "
                            "it: give the nodes the driver's default mode 0666 (nvidia module option "
                            "NVreg_DeviceFileMode), or run as root (no --user)")


def test_check_devices_reads_the_real_modes_of_real_nodes():
    """/dev/null (0666) is open to anyone; a root-only file is not."""
    check_devices(NMUSER, ["/dev/null"], Facts())
    assert os.stat("/dev/null").st_mode & 0o666 == 0o666
