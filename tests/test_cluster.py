"""`nearmetal cluster`: a real local Slurm cluster (munged, slurmctld, 3 slurmd) running real
jobs: multi-node steps, PMIx and PMI2 direct launch of both MPIs, heterogeneous steps; and
what `slurm.info` detects. The module's cluster lives in a temporary directory
($NEARMETAL_HOME is not touched); the last test stops it and checks, through /proc, that
nothing of it is left running. Tests run in file order."""

import json
import os
import signal
import subprocess
import time
from importlib import resources

import jsonschema
import pytest

from conftest import assert_one_line_error, nearmetal
from nearmetal.errors import NearmetalError
from nearmetal.slurm import cluster, cluster_conf, cluster_daemons, info

NODES = ["n1", "n2", "n3"]
PMI = {"openmpi": "pmix", "mpich": "pmi2"}


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    t0 = time.monotonic()
    cl = cluster.up(dir=d)
    cl.start_seconds = time.monotonic() - t0
    try:
        yield cl
    finally:
        cluster.down(dir=d)


def client_env(cl, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
    return env | cl.env() | extra


def srun_process(cl, *args, timeout=60, **extra_env):
    """srun's CompletedProcess (its output as text), whatever its exit status."""
    return subprocess.run(["srun", *map(str, args)], env=client_env(cl, **extra_env), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def srun(cl, *args, timeout=60, **extra_env):
    out = srun_process(cl, *args, timeout=timeout, **extra_env)
    assert out.returncode == 0, f"srun {' '.join(map(str, args))} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out.stdout


def mpi_info(family):
    from nearmetal.kernels.build import host_bin

    return os.path.join(host_bin(family), "nm-mpi-info")


def parse_ranks(stdout):
    rows = []
    for line in stdout.splitlines():
        if line.startswith("rank="):
            fields = dict(f.split("=", 1) for f in line.split()[:3])
            rows.append((int(fields["rank"]), int(fields["size"])))
    return sorted(rows)


def listening_addresses(pids):
    """(ip, port) of the TCP sockets the given processes listen on, from /proc."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            pass
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN
                addr, port = f[1].split(":")
                if len(addr) == 8:
                    ip = ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
                else:
                    ip = addr
                found.append((ip, int(port, 16)))
    return found


def live(pid):
    """Whether a process runs (zombies do not: PID 1 here reaps orphans only every few seconds)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZXx"


# --- the cluster --------------------------------------------------------------------------------


def test_up_starts_idle_nodes_on_loopback_in_seconds(slurm):
    assert slurm.nodes == NODES
    assert slurm.start_seconds < 15, slurm.start_seconds
    assert not slurm.already_up
    assert slurm.env() == {"SLURM_CONF": str(slurm.conf)}
    st = cluster.status(slurm.dir)
    assert st["up"] and st["state"] == "up"
    assert [(n["name"], n["state"]) for n in st["nodes"]] == [(n, "idle") for n in NODES]
    assert len({n["port"] for n in st["nodes"]} | {st["ports"]["slurmctld"]}) == 4
    conf = slurm.conf.read_text()
    assert "NodeAddr=127.0.0.1" in conf and "SchedulerType=sched/backfill" in conf
    assert f"AuthInfo=socket={slurm.dir}/munge/munge.socket" in conf
    daemons = [st["munged"], st["slurmctld"]] + [n["pid"] for n in st["nodes"]]
    addrs = listening_addresses(daemons)
    assert len(addrs) >= 4, addrs
    assert {ip for ip, _ in addrs} == {"127.0.0.1"}, addrs


def test_srun_spans_three_nodes(slurm):
    out = srun(slurm, "-N3", "-n3", "printenv", "SLURMD_NODENAME")
    assert sorted(out.split()) == NODES


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_direct_launch_with_each_mpis_pmi(slurm, family):
    out = srun(slurm, f"--mpi={PMI[family]}", "-n2", mpi_info(family))
    assert parse_ranks(out) == [(0, 2), (1, 2)], out


def srun_teardown_fault(out):
    """srun aborted by glibc's heap check after the step ended (Slurm 22.05 + PMIx, het steps)."""
    return out.returncode == -6 and "double free or corruption" in out.stderr


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_heterogeneous_step_shares_comm_world(slurm, family):
    """Up to 5 attempts: with Open MPI 4.1.4 under --mpi=pmix, srun of a het step hangs after
    both components have exited 0 about one time in six here, and rarely aborts ("double free
    or corruption") at the same point (upstream, documented in docs/slurm-cluster.md). A
    normal step takes 1-2 s."""
    prog = mpi_info(family)
    for attempt in range(1, 6):
        try:
            out = srun_process(slurm, f"--mpi={PMI[family]}", "-n1", prog, ":", "-n1", prog, timeout=20)
        except subprocess.TimeoutExpired:
            subprocess.run(["scancel", "--user", "root"], env=client_env(slurm), capture_output=True)
            if attempt == 5:
                raise
            continue
        if not srun_teardown_fault(out) or attempt == 5:
            break
    assert out.returncode == 0, f"srun failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    assert parse_ranks(out.stdout) == [(0, 2), (1, 2)], out.stdout


def test_cli_up_again_is_a_noop_and_status(slurm, tmp_path_factory):
    before = cluster.status(slurm.dir)
    again = nearmetal("cluster", "up", "--dir", slurm.dir, check=True, timeout=60)
    assert "already up" in again.stdout and f"export SLURM_CONF={slurm.conf}" in again.stdout
    after = cluster.status(slurm.dir)
    assert [n["pid"] for n in after["nodes"]] == [n["pid"] for n in before["nodes"]]
    assert after["slurmctld"] == before["slurmctld"] and after["munged"] == before["munged"]
    assert cluster.up(dir=slurm.dir).already_up

    st = nearmetal("cluster", "status", "--dir", slurm.dir, check=True)
    lines = st.stdout.splitlines()
    assert lines[0].startswith(f"cluster in {slurm.dir}: up")
    for n in NODES:
        # "planned": idle, but reserved by the last backfill pass for the het job (cleared within 1 s)
        assert any(l.split()[:1] == [n] and l.split()[1] in ("idle", "planned") for l in lines), st.stdout
    assert lines[-1] == f"export SLURM_CONF={slurm.conf}"
    js = json.loads(nearmetal("cluster", "status", "--dir", slurm.dir, "--json", check=True).stdout)
    assert js["up"] and js["env"] == slurm.env()

    other = nearmetal("cluster", "up", "--dir", slurm.dir, "--nodes", "2")
    assert "up with 3 nodes, not 2" in assert_one_line_error(other)
    huge = tmp_path_factory.mktemp("huge")
    assert "--nodes 20000: at most 256" in assert_one_line_error(  # refused before 20000 directories are made
        nearmetal("cluster", "up", "--nodes", "20000", "--dir", huge / "c"))
    assert not (huge / "c" / "nodes").exists()
    for command in ("status", "down"):  # a file is no cluster that is "down"
        assert "the cluster directory /etc/passwd exists and is not a directory" in assert_one_line_error(
            nearmetal("cluster", command, "--dir", "/etc/passwd"))


def test_detect_reports_pmi_and_hetjob(slurm):
    t0 = time.monotonic()
    found = info.detect(client_env(slurm))
    assert time.monotonic() - t0 < 5
    assert found is not None
    assert found["version"].startswith("22.05")
    assert {"pmix", "pmi2", "none"} <= set(found["mpi_plugins"])
    assert not any(p.startswith("srun") or " " in p for p in found["mpi_plugins"])
    assert found["hetjob"] is True and found["scheduler"] == "sched/backfill"
    assert found["nodes"] == 3
    assert found["partitions"] == [{"name": "debug", "nodes": 3, "default": True}]
    assert found["conf"] == str(slurm.conf)
    assert found["in_allocation"] is False and found["job_id"] is None
    inside = info.detect(client_env(slurm, SLURM_JOB_ID="42"))
    assert inside["in_allocation"] is True and inside["job_id"] == "42"


def test_hazards(slurm):
    found = info.detect(client_env(slurm))
    assert info.hazards(found, {}, mpis=["openmpi", "mpich"]) == []
    hz = info.hazards(found, {"SLURM_EXPORT_ENV": "NONE", "SBATCH_EXPORT": "none,FOO=1"}, mpis=[])
    assert [h["variable"] for h in hz] == ["SLURM_EXPORT_ENV", "SBATCH_EXPORT"]
    assert all("heterogeneous" in h["why"] and h["fix"] for h in hz)
    assert info.hazards(None, {"SLURM_EXPORT_ENV": "NONE"})[0]["variable"] == "SLURM_EXPORT_ENV"
    assert info.hazards(found, {"SLURM_EXPORT_ENV": "ALL"}, mpis=[]) == []
    no_pmix = dict(found, mpi_plugins=["none", "pmi2"])
    hz = info.hazards(no_pmix, {}, mpis=["openmpi", "mpich"])
    assert len(hz) == 1 and "pmix" in hz[0]["why"] and "Open MPI" in hz[0]["why"]
    no_pmi2 = dict(found, mpi_plugins=["none", "pmix", "pmix_v4"])
    hz = info.hazards(no_pmi2, {}, mpis=["openmpi", "mpich"])
    assert len(hz) == 1 and "pmi2" in hz[0]["why"] and "MPICH" in hz[0]["why"]
    hz = info.hazards(found, {"SLURM_MPI_TYPE": "pmi3"}, mpis=[])
    assert len(hz) == 1 and hz[0]["value"] == "pmi3"


def test_doctor_reports_slurm(slurm):
    schema = json.loads(resources.files("nearmetal").joinpath("schemas/doctor.schema.json").read_text())
    env = slurm.env() | {"SLURM_EXPORT_ENV": "NONE"}
    out = nearmetal("doctor", "--json", env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    jsonschema.validate(report, schema)
    s = report["slurm"]
    assert s["hetjob"] and "pmix" in s["mpi_plugins"] and s["nodes"] == 3
    assert [h["variable"] for h in s["hazards"]] == ["SLURM_EXPORT_ENV"]
    human = nearmetal("doctor", env=env, timeout=600)
    assert "heterogeneous jobs: yes" in human.stdout and "hazard SLURM_EXPORT_ENV=NONE" in human.stdout


def test_detect_is_none_and_fast_without_slurm(tmp_path):
    base = {"PATH": os.environ["PATH"]}
    for env in (base | {"SLURM_CONF": str(tmp_path / "missing.conf")},  # clients would retry for 60 s
                base if not info.conf_path(base) else None):
        if env is None:
            continue  # this host has a system slurm.conf
        t0 = time.monotonic()
        assert info.detect(env) is None
        assert time.monotonic() - t0 < 1


def test_parse_mpi_list_formats():
    new = "MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\nspecific pmix plugin versions available: pmix_v4\n"
    assert info.parse_mpi_list(new) == ["cray_shasta", "none", "pmi2", "pmix", "pmix_v4"]
    old = "srun: MPI types are...\nsrun: none\nsrun: pmi2\nsrun: pmix\nsrun: pmix_v3\n"
    assert info.parse_mpi_list(old) == ["none", "pmi2", "pmix", "pmix_v3"]


def test_failed_start_names_the_log_and_leaves_nothing(tmp_path, monkeypatch):
    d = tmp_path / "broken"
    orig = cluster_conf.render_conf
    monkeypatch.setattr(cluster_conf, "render_conf",
                        lambda *a: orig(*a).replace("ProctrackType=proctrack/linuxproc", "ProctrackType=proctrack/bogus"))
    with pytest.raises(NearmetalError) as e:
        cluster.up(dir=d, timeout=10)
    assert "proctrack/bogus" in str(e.value) and f"{d}/nodes/n1/slurmd.log" in str(e.value)
    assert cluster.status(d)["state"] == "down"

    monkeypatch.setattr(cluster_conf, "render_conf", orig)
    monkeypatch.setattr(cluster_daemons, "node_states", lambda conf, timeout=5: {"n1": "idle", "n2": "unknown*"})
    with pytest.raises(NearmetalError) as e:
        cluster.up(dir=d, nodes=2, timeout=1)
    msg = str(e.value)
    assert "not idle after 1 s" in msg and "n2: unknown*" in msg and f"{d}/ctld/slurmctld.log" in msg, msg
    assert cluster.status(d)["state"] == "down" and not cluster.status(d)["processes"]


def test_down_stops_every_process_of_the_cluster(slurm):
    """Last: leaves job steps running (one task escaped into its own session), stops the
    cluster, then checks /proc for anything of it."""
    env = client_env(slurm)
    clients = [subprocess.Popen(["srun", *args], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
               for args in (["-N2", "-n2", "sleep", "300"], ["-n1", "setsid", "sleep", "301"])]
    try:
        end = time.monotonic() + 20
        while True:
            st = cluster.status(slurm.dir)
            sleeps = [pid for pid, comm in st["processes"].items() if comm == "sleep"]
            if len(st["steps"]) >= 3 and len(sleeps) >= 3:
                break
            assert time.monotonic() < end, f"job steps did not start: {st['processes']}"
            time.sleep(0.1)
        ours = dict(st["processes"])
        assert {"munged", "slurmctld", "slurmd", "slurmstepd", "sleep"} <= set(ours.values())

        r = cluster.down(dir=slurm.dir)
        assert r["was_running"] and set(r["stopped"]) >= set(ours)
        assert [pid for pid in ours if live(pid)] == []
        marker = f"{cluster_daemons.MARKER}={slurm.dir}".encode()
        conf = f"SLURM_CONF={slurm.conf}".encode()
        for name in os.listdir("/proc"):
            if not name.isdigit() or not live(int(name)):
                continue
            try:
                environ = open(f"/proc/{name}/environ", "rb").read().split(b"\0")
                comm = open(f"/proc/{name}/comm").read().strip()
            except OSError:
                continue
            assert marker not in environ, (name, comm)
            assert not (conf in environ and comm in ("sleep", "slurmstepd", "slurmd", "slurmctld", "munged")), (name, comm)
        assert cluster.status(slurm.dir)["state"] == "down"

        t0 = time.monotonic()
        assert info.detect(env) is None
        assert time.monotonic() - t0 < 5
        assert cluster.down(dir=slurm.dir)["was_running"] is False
        again = nearmetal("cluster", "down", "--dir", slurm.dir, check=True)
        assert "not running" in again.stdout
        assert nearmetal("cluster", "status", "--dir", slurm.dir).returncode == 3
    finally:
        for c in clients:  # our own srun clients (and the helper each forks): their job is gone
            try:
                os.killpg(c.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            c.wait()


@pytest.mark.unit
def test_where_no_slurm_answers_the_hint_names_the_local_cluster_that_is_up(monkeypatch):
    """With nearmetal's cluster up but SLURM_CONF not exported, `run --scheduler slurm` and
    doctor said to start one (a new user had); they give the export line instead."""
    from nearmetal.slurm import cluster

    monkeypatch.setattr(cluster, "status", lambda node_states=True: {"up": True, "conf": "/h/cluster/slurm.conf"})
    assert cluster.unreachable_hint() == "nearmetal's local cluster is up: export SLURM_CONF=/h/cluster/slurm.conf"
    monkeypatch.setattr(cluster, "status", lambda node_states=True: {"up": False, "conf": "/h/cluster/slurm.conf"})
    assert cluster.unreachable_hint() == "start a local one with `nearmetal cluster up`"
