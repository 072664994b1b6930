"""Placement dimensions (study/config/placement.py), the study runner as a batch job's script
(slurm/runner_job.py, study/execute/submit.py) and the store's cluster-file-system mode
(study/store/shared_fs.py): planned cells, ids, refusals and generated text, without a cluster
(the real jobs run in test_submit.py)."""

import os
import sqlite3

import pytest

from nearmetal.errors import NearmetalError
from nearmetal.study.store import shared_fs
from nearmetal.study.plan.study_file import parse
from nearmetal.study.plan.plan import baseline_of, cells, variant_id

pytestmark = pytest.mark.unit

HEAD = '[study]\nname = "p"\nrepetitions = 2\nscheduler = "slurm"\n'
NATIVE = '[matrix]\nmode = ["native", "hybrid"]\nruntime = ["charliecloud"]\nmpi = ["openmpi"]\n'


def study(matrix="", bench='[[benchmark]]\nkernel = "allgather"\n', head=HEAD):
    return parse(head + NATIVE + matrix + bench)


def test_ranks_per_node_makes_the_ranks_and_one_variant_per_density():
    cfg = study('nodes = [1, 2, 4]\nranks_per_node = [2]\n')
    got = sorted((variant_id(c.variant), c.ranks) for c in cells(cfg))
    assert got == [("hybrid/charliecloud/openmpi/default+2-per-node", 2),
                   ("hybrid/charliecloud/openmpi/default+2-per-node", 4),
                   ("hybrid/charliecloud/openmpi/default+2-per-node", 8),
                   ("native/openmpi+2-per-node", 2), ("native/openmpi+2-per-node", 4), ("native/openmpi+2-per-node", 8)]


def test_nodes_alone_spread_the_ranks_and_show_in_the_id():
    cfg = study('nodes = [1, 2]\nranks = [4]\n')
    got = sorted((variant_id(c.variant), c.ranks) for c in cells(cfg))
    assert got == [("hybrid/charliecloud/openmpi/default", 4), ("hybrid/charliecloud/openmpi/default+2-nodes", 4),
                   ("native/openmpi", 4), ("native/openmpi+2-nodes", 4)]


def test_the_baseline_runs_at_the_same_placement():
    cfg = study('nodes = [2]\nranks = [4]\n')
    hybrid = next(c for c in cells(cfg) if c.variant["mode"] == "hybrid")
    assert variant_id(baseline_of(cfg, hybrid.variant)) == "native/openmpi+2-nodes"


def test_named_variants_take_the_placement_too():
    cfg = parse(HEAD + '[matrix]\nranks_per_node = [1, 2]\nnodes = [2]\n'
                '[[variant]]\nname = "v"\nmode = "native"\nmpi = "openmpi"\n[baseline]\nvariant = "v"\n'
                '[[benchmark]]\nkernel = "allgather"\n')
    assert sorted((variant_id(c.variant), c.ranks) for c in cells(cfg)) == [("v+1-per-node", 2), ("v+2-per-node", 4)]


def test_studies_without_placement_keep_their_ids_and_stored_variants():
    cfg = study('ranks = [2]\n')
    assert sorted(variant_id(c.variant) for c in cells(cfg)) == ["hybrid/charliecloud/openmpi/default",
                                                                  "native/openmpi"]
    assert all("nodes" not in c.variant and "ranks_per_node" not in c.variant for c in cells(cfg))


@pytest.mark.parametrize("text, message", [
    ('nodes = [2]\n', "study.scheduler: cells ask for 2 nodes, but scheduler \"local\""),
    ('ranks = [2]\nranks_per_node = [2]\n', "give ranks or ranks_per_node, not both"),
    ('nodes = [0]\n', "matrix.nodes"),
])
def test_placement_refusals_name_the_key(text, message):
    with pytest.raises(NearmetalError, match=message.replace("(", r"\(")):
        study(text, head=HEAD.replace('scheduler = "slurm"\n', ""))


def test_slurm_nodes_and_the_nodes_dimension_are_not_both_given():
    with pytest.raises(NearmetalError, match="slurm.nodes: give the nodes once"):
        parse(HEAD + '[slurm]\nnodes = 2\n' + NATIVE + 'nodes = [1, 2]\n[[benchmark]]\nkernel = "allgather"\n')


def test_a_kernel_that_cannot_use_the_derived_ranks_says_where_they_come_from():
    from nearmetal.study.plan.plan import check_kernel_ranks

    cfg = study('nodes = [2]\nranks_per_node = [2]\n', bench='[[benchmark]]\nkernel = "latency"\n')
    with pytest.raises(NearmetalError, match=r"matrix.ranks_per_node: kernel 'latency' needs exactly 2 ranks, "
                                             r"found 4 \(2 nodes x ranks_per_node 2\)"):
        check_kernel_ranks(cfg)


def test_the_runner_job_is_sized_for_the_largest_cell():
    from nearmetal.study.execute.submit import job_size

    cfg = study('nodes = [1, 3]\nranks_per_node = [2]\nthreads = [1, 2]\n')
    assert job_size(cfg) == {"nodes": 3, "per_node": 2, "threads": 2}
    cfg = study('ranks = [2, 6]\n')  # one node ([slurm] nodes unset): every rank on it
    assert job_size(cfg) == {"nodes": 1, "per_node": 6, "threads": 1}


def test_the_runner_script_execs_the_runner_with_checked_values(tmp_path):
    from nearmetal.slurm.runner_job import script

    argv = ["/opt/nm/bin/nearmetal", "study", "/s/it's.toml", "--resume", "--db", "/r/study.db", "--no-progress"]
    text = script(argv, {"nodes": 2, "per_node": 4, "threads": 2}, {"time": "10", "partition": "debug", "nodes": None},
                  tmp_path, "p")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert {"#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --cpus-per-task=2", "#SBATCH --time=10",
            "#SBATCH --partition=debug", f"#SBATCH --output={tmp_path}/runner-%j.out"} <= set(lines)
    assert lines[-1] == "exec /opt/nm/bin/nearmetal study '/s/it'\"'\"'s.toml' --resume --db /r/study.db --no-progress"
    with pytest.raises(NearmetalError, match="newline"):
        script(argv[:2] + ["/s/a\nb.toml"], {"nodes": 1, "per_node": 1}, {}, tmp_path, "p")
    with pytest.raises(NearmetalError, match="--time"):
        script(argv, {"nodes": 1, "per_node": 1}, {"time": "1;rm"}, tmp_path, "p")
    with pytest.raises(NearmetalError, match="cannot be written into a batch script"):
        script(argv, {"nodes": 1, "per_node": 1}, {}, tmp_path / "a b", "p")


def test_submit_needs_a_batch_scheduler():
    from nearmetal import schedulers

    with pytest.raises(NearmetalError, match="--submit: scheduler \"local\" starts every run on this machine"):
        schedulers.get("local").submit_runner([], {}, {}, "/tmp", "p")


MOUNTINFO = r"""22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
30 22 0:40 / /scratch rw - lustre 10.0.0.1@o2ib:/fs rw,flock
31 22 0:41 / /home rw - nfs4 srv:/home rw
32 31 0:42 / /home/local\040disk rw - xfs /dev/sdb rw
"""


@pytest.mark.parametrize("path, kind", [("/scratch/u/results/study.db", "lustre"), ("/home/u/s.db", "nfs4"),
                                        ("/home/local disk/s.db", "xfs"), ("/tmp/x.db", "ext4")])
def test_the_file_system_of_a_database_comes_from_mountinfo(path, kind):
    assert shared_fs.fs_type(path, MOUNTINFO) == kind


def test_copy_mode_on_cluster_file_systems_unless_told(monkeypatch):
    assert shared_fs.copy_mode("/scratch/s.db", {}, MOUNTINFO)
    assert not shared_fs.copy_mode("/tmp/s.db", {}, MOUNTINFO)
    assert shared_fs.copy_mode("/tmp/s.db", {"NEARMETAL_STORE_MODE": "copy"}, MOUNTINFO)
    assert not shared_fs.copy_mode("/scratch/s.db", {"NEARMETAL_STORE_MODE": "direct"}, MOUNTINFO)
    with pytest.raises(NearmetalError, match="NEARMETAL_STORE_MODE='wal': expected one of auto, direct, copy"):
        shared_fs.copy_mode("/tmp/s.db", {"NEARMETAL_STORE_MODE": "wal"}, MOUNTINFO)


def test_a_store_in_copy_mode_writes_a_complete_rollback_journal_database_after_each_transaction(tmp_path, monkeypatch):
    from nearmetal.study.store.store import Store

    monkeypatch.setenv("NEARMETAL_STORE_MODE", "copy")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "local"))
    (tmp_path / "local").mkdir()
    db = tmp_path / "shared" / "study.db"
    store = Store(db, what="study 'x'")
    try:
        sid = store.create_study("x", "[study]", 1, 0.03, {}, "0", "now")
        assert os.listdir(tmp_path / "local")  # the writer's copy is runner-local
        assert sorted(os.listdir(db.parent)) == ["study.db", "study.db.lock"]  # no -wal, no -shm, no temporary
        with open(db, "rb") as f:
            head = f.read(20)
        assert head[18:20] == b"\x01\x01"  # rollback journal, readable without shared memory
        assert sqlite3.connect(db).execute("SELECT id FROM studies").fetchall() == [(sid,)]
    finally:
        store.close()
    assert os.listdir(tmp_path / "local") == []  # the copy goes with the writer
    with Store(db, readonly=True) as reader:
        assert reader.study("x")["id"] == sid
