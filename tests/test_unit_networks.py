"""Networks (networks/): the registry, what an isolated network asks of each launcher, what it
refuses, and the emulated cluster's names and addresses — argv for argv, without a machine
(the real namespaces are tested in test_networks.py)."""

import os

import pytest

from nearmetal import networks
from nearmetal.errors import NearmetalError
from nearmetal.networks import NETWORKS, Network
from nearmetal.networks._netns import hosts_text, node_address
from nearmetal.networks.isolated import Isolated
from test_unit_compose import launch, machine, req  # noqa: F401  (machine: autouse fixture)

pytestmark = pytest.mark.unit

AGENT = "/t/nm-netns-agent"


@pytest.fixture
def as_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(Isolated, "agent", lambda self: AGENT)  # the C agent's build is not this tier's


def test_the_networks_come_from_the_registry():
    from nearmetal.choices import networks as choices
    from nearmetal.cli_parser import build_parser

    assert networks.names()[:2] == ("host", "isolated") and choices() == networks.names()
    run = build_parser()._subparsers._group_actions[0].choices["run"]
    action = next(a for a in run._actions if a.dest == "network")
    assert tuple(action.choices) == networks.names() and action.default == "host"


def test_host_network_changes_nothing():
    plain = launch(req(mpi="openmpi", ranks=2))
    assert launch(req(mpi="openmpi", ranks=2, network="host")) == plain
    assert "--host" not in plain[0] and "_netns" not in plain[0]


def test_isolated_open_mpi_one_rank_per_node_through_the_agent(as_root):
    argv, _, notes = launch(req(mpi="openmpi", ranks=3, network="isolated"))
    head, _, launcher = argv.partition(" -- ")
    assert head.endswith(f"-m nearmetal.networks._netns --nodes 3 --agent {AGENT}")
    assert launcher.startswith("/usr/bin/mpirun.openmpi -np 3 --allow-run-as-root --bind-to none "
                               f"--noprefix --host n0:1,n1:1,n2:1 --mca plm_rsh_agent {AGENT} --mca plm_rsh_no_tree_spawn 1 --mca routed direct ")
    assert launcher.endswith("/usr/bin/prog -x 1")
    assert any("3 emulated nodes" in n for n in notes)


def test_isolated_hydra_starts_its_proxies_through_the_agent(as_root):
    argv, _, _ = launch(req(mpi="mpich", ranks=2, network="isolated"))
    launcher = argv.partition(" -- ")[2]
    assert launcher.startswith(f"/usr/bin/mpiexec.hydra -launcher ssh -launcher-exec {AGENT} -hosts n0:1,n1:1 -n 2 ")


def test_isolated_mpmd_places_every_component_on_its_own_nodes(as_root):
    argv, _, _ = launch(req(mpi="mpich", ranks=2, network="isolated"), req(ranks=1, program="other"))
    assert "--nodes 3 " in argv and argv.count("-hosts n0:1,n1:1,n2:1") == 1


@pytest.mark.parametrize("kw, message", [
    (dict(), "needs root"),
    (dict(ranks_per_node=2), "--ranks-per-node must be 1"),
    (dict(scheduler="slurm"), "runs on this machine only"),
])
def test_isolated_refuses_what_it_cannot_emulate(kw, message, monkeypatch):
    from nearmetal.run import plan
    from test_unit_compose import FakeHost

    if message != "needs root":
        monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(NearmetalError, match=message):
        plan(req(mpi="openmpi", ranks=4, network="isolated", **kw), host=FakeHost())


def test_an_unknown_network_names_the_choices():
    from nearmetal.run import plan

    with pytest.raises(NearmetalError, match=r"unknown network 'overlay' \(choose from: host, isolated"):
        plan(req(mpi="openmpi", network="overlay"))


def test_the_emulated_nodes_are_named_and_addressed_inside_their_namespaces():
    text = hosts_text(3)
    assert text.splitlines() == ["127.0.0.1\tlocalhost", "10.231.0.1\tnmhub", "10.231.0.2\tn0",
                                 "10.231.0.3\tn1", "10.231.0.4\tn2"]
    assert node_address(249) == "10.231.0.251"


def test_a_new_network_is_one_class_and_its_registration(monkeypatch):
    """A backend registered from outside the package is a choice and wraps the launch."""

    @NETWORKS.register(name="tagged")
    class Tagged(Network):
        def wrap(self, argv, total_ranks):
            return ["tagger", str(total_ranks), *argv]

    try:
        assert "tagged" in networks.names()
        argv, _, _ = launch(req(mpi="openmpi", ranks=2, network="tagged"))
        assert argv.startswith("tagger 2 /usr/bin/mpirun.openmpi -np 2 ")
    finally:
        NETWORKS.unregister("tagged")


def test_what_sets_the_host_network_apart_is_an_attribute():
    """The host network is a backend like any other: a network registered from outside that is
    not emulated launches as the host's does and is open to --user; an emulated one is not."""
    from nearmetal import privilege
    from test_unit_privilege import NM, AccountHost, components

    @NETWORKS.register(name="wired")
    class Wired(Network):
        emulated = False

    try:
        assert networks.get("host").emulated is False and networks.get("isolated").emulated is True
        assert networks.is_default(None) and networks.is_default("host") and not networks.is_default("wired")
        assert launch(req("hybrid", mpi="mpich", ranks=2, network="wired")) == launch(req("hybrid", mpi="mpich", ranks=2))
        host = AccountHost()
        cs = components(mode="native", mpi="openmpi", host=host)
        cs[0].network = "wired"
        privilege.check(cs, NM, host.facts(), "/w")  # accepted, as on the host's network
        assert networks.get("wired").account_problem() is None
        assert networks.get("isolated").account_problem() == "its emulated nodes are built as root around the launcher"
    finally:
        NETWORKS.unregister("wired")


# What the MPIs printed here (Open MPI 4.1.4 with btl_base_verbose=1; MPICH 4.0.2 / UCX 1.13.1
# with UCX_LOG_LEVEL=info), trimmed to the lines that matter.
OPEN_MPI_SHM = """[vm:11644] mca: bml: Using vader btl for send to [[16777,1],0] on node vm
[vm:11643] mca: bml: Using self btl for send to [[16777,1],0] on node vm
"""
OPEN_MPI_ISOLATED = """[n0:11261] mca: bml: Using tcp btl for send to [[6575,1],1] on node n1
[n1:11262] mca: bml: Using self btl for send to [[6575,1],1] on node n1
"""
UCX_SHM = """[1795586245.235771] [vm:11685:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(self/memory0 cma/memory) rma(self/memory0 sysv/memory posix/memory) am(self/memory0 cma/memory)
[1795586245.235801] [vm:11686:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(sysv/memory cma/memory) rma(sysv/memory posix/memory) am(sysv/memory cma/memory)
"""
UCX_TCP = """[1795586245.580615] [n0:11712:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(self/memory0 cma/memory) rma(self/memory0 sysv/memory posix/memory) am(self/memory0 cma/memory)
[1795586245.580806] [n0:11712:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[1]: tag(tcp/eth0) rma_am(tcp/eth0) am(tcp/eth0)
"""

# UCX 1.18.1 (trixie's MPICH, the same variables): the endpoint's kind is named, and a line of
# over 128 bytes comes in 128-byte pieces, so two ranks' lines interleave (verbatim, as printed).
UCX118_SHM = """[1795597312.982537] [vm:12362:0]      ucp_worker.c:1903 UCX  INFO    ucp_context_0 intra-node cfg#0 tag(sysv/memory cma/memory)  rma(sysv/memory posix/memory)  am(sysv/memory cma/memory)
[1795597312.982754] [vm:12361:0]      ucp_worker.c:1903 UCX  INFO    ucp_context_0 self cfg#0 tag(self/memory cma/memory)  rma(self/memory)  am(self/memory cma/memory)
"""
UCX118_TCP = """[1795597313.153105] [vm:12372:0]      ucp_worker.c:1903 UCX  INFO    ucp_context_0 self cfg#0 tag(tcp/lo tcp/eth0)  rma_am(tcp/l[1795597313.153110] [vm:12373:0]      ucp_worker.c:1903 UCX  INFO    ucp_context_0 intra-node cfg#0 tag(tcp/lo tcp/eth0)  rma_am(tcp/lo)  am(tcp/lo tcp/eth0)
o)  am(tcp/lo tcp/eth0)
"""
UCX118_ISOLATED = """[1795597313.392928] [n0:12399:0]      ucp_worker.c:1903 UCX  INFO    ucp_context_0 self cfg#0 tag(self/memory cma/memory)  rma(s[1795597313.393072] [n1:12400:0]      ucp_worker.c:1903 UCX  INFO    ucp_context_0 inter-node cfg#0 tag(tcp/eth0)  rma_am(tcp/etelf/memory)  am(self/memory cma/memory)
h0)  am(tcp/eth0)
"""


@pytest.mark.parametrize("text, used, shm, tcp_in_node", [
    (OPEN_MPI_SHM, ["vader"], True, False),
    (OPEN_MPI_ISOLATED, ["tcp"], False, True),
    (UCX_SHM, ["cma", "posix", "sysv"], True, False),
    (UCX_TCP, ["tcp"], False, True),

    (UCX118_SHM, ["cma", "posix", "sysv"], True, False),
    (UCX118_TCP, ["tcp"], False, True),
    (UCX118_ISOLATED, ["tcp"], False, True),
])
def test_the_transport_is_read_from_the_mpis_own_reporting(text, used, shm, tcp_in_node):
    from nearmetal.families._transport import report, summary, warning

    s = summary(report(text), one_machine=True)
    assert (s["between_ranks"], s["shared_memory"], s["tcp_within_node"]) == (used, shm, tcp_in_node)
    assert (warning(s) is not None) == tcp_in_node


def test_tcp_between_hosts_of_a_cluster_is_no_fallback():
    from nearmetal.families._transport import report, summary

    text = "[c1:7] mca: bml: Using tcp btl for send to [[5,1],1] on node c2\n"
    assert summary(report(text), one_machine=False)["tcp_within_node"] is False
    assert summary(report(text.replace("node c2", "node c1")), one_machine=False)["tcp_within_node"] is True
    assert summary(report("no MPI said anything"), one_machine=True) is None


def test_isolated_network_with_a_batch_scheduler_is_refused_in_a_study():
    from nearmetal.study.plan.study_file import parse

    with pytest.raises(NearmetalError, match="network act on this machine"):
        parse('[study]\nname = "a"\nrepetitions = 2\nscheduler = "slurm"\n[matrix]\nmode = ["native"]\n'
              'mpi = ["mpich"]\nnetwork = ["host", "isolated"]\n[[benchmark]]\nkernel = "startup"\n')


def test_isolated_variants_are_named_and_run_against_the_host_network():
    from conftest import planned_variants
    from nearmetal.study.plan.plan import baseline_of, cells, variant_id

    cfg, ids = planned_variants('network = ["host", "isolated"]')
    assert ids == ["hybrid/charliecloud/mpich/default", "hybrid/charliecloud/mpich/default+isolated",
                   "native/mpich", "native/mpich+isolated"]
    isolated = next(c.variant for c in cells(cfg) if variant_id(c.variant) == "native/mpich+isolated")
    assert isolated["network"] == "isolated" and variant_id(baseline_of(cfg, isolated)) == "native/mpich"


def test_the_report_lines_are_dropped_from_a_runs_stored_stderr():
    from nearmetal.families._transport import without_reports

    diag = ("[1795586245.235072] [vm:11685:0]       rdmacm_cm.c:928  UCX  DIAG  rdma_create_event_channel failed: "
            "No such device\n")
    text = "nearmetal: timed out after 15 s\n" + OPEN_MPI_SHM + UCX_TCP + diag + "prog: cannot open input\n"
    assert without_reports(text) == "nearmetal: timed out after 15 s\nprog: cannot open input\n"


def test_ucx_lines_of_a_pid_below_10000_are_read_too():
    from nearmetal.families._transport import report, without_reports

    line = ("[1795586245.235801] [vm:5802 :0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(sysv/memory cma/memory) "
            "rma(sysv/memory posix/memory) am(sysv/memory cma/memory)\n")
    assert sorted(t for _, _, t in report(line)) == ["cma", "posix", "sysv"]
    assert without_reports(line) == ""


def test_ucx_1_18_names_the_peers_node_and_its_interleaved_lines_are_not_mixed_up():
    from nearmetal.families._transport import report, summary, without_reports

    # n0's own endpoint (self, cma) around n1's inter-node line: n1 used tcp only, to another node
    assert report(UCX118_ISOLATED) == [("n1", None, "tcp")]
    assert summary(report(UCX118_ISOLATED), one_machine=False)["tcp_within_node"] is False
    # intra-node is the same node whatever the host names say
    assert summary(report(UCX118_TCP), one_machine=False)["tcp_within_node"] is True
    diag = ("[1795597296.922004] [vm:12058:f]        vfs_sock.c:49   UCX  DIAG  failed to create directory "
            "'/run/user/0/ucx': No such file or directory\n[1795597296.928434] [vm:12058:0]     ucp_context.c:2257 "
            "UCX  INFO  Version 1.18.1 (loaded from /lib/x86_64-linux-gnu/libucp.so.0)\n")
    assert without_reports(diag + UCX118_SHM + "prog: cannot open input\n") == "prog: cannot open input\n"
