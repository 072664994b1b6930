"""nm-coupled, the coupled-model proxy: two components (atm, ocn) on split MPI_COMM_WORLD.

SPMD launches (`nearmetal bench coupled -n 3 -- --atm-ranks 1`) natively with both MPIs and
in containers (hybrid and bind on the default image); MPMD launches (`mpirun -np 1 PROG
--role atm : -np 2 PROG --role ocn`, a heterogeneous job's shape) directly with each host
launcher. Every launch style and rank split must give the same, bitwise reproducible
checksums, equal to the kernel's own serial replay; a corrupted exchange and a world with
one role only must fail. Small grids: every run computes for milliseconds.
"""

import json
import os
import subprocess

import jsonschema
import pytest

from conftest import REPO, nearmetal

SCHEMA = json.loads((REPO / "src/nearmetal/schemas/bench-record.schema.json").read_text())
SMALL = ["--couplings", "4", "--atm-nx", "48", "--atm-ny", "24", "--atm-nz", "4", "--ocn-nx", "72", "--ocn-ny", "36",
         "--ocn-nz", "5"]
TIMES = {"init_s", "main_loop_s", "compute_s", "halo_s", "exchange_s"}
MPMD = {"openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"], "mpich": ["mpiexec.mpich"]}
NP = {"openmpi": "-np", "mpich": "-n"}


def bench(*launch, kargs, expect_ok=True):
    out = nearmetal("bench", "coupled", *launch, "--json", "--", *kargs, timeout=300)
    if not expect_ok:
        return out
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    records = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    for r in records:
        jsonschema.validate(r, SCHEMA)
        assert r["kernel"] == "coupled"
    return records


def mpmd(mpi, parts, env=None, timeout=120):
    """Launch host nm-coupled MPMD: parts = [(ranks, [args...]), ...] joined by ':'."""
    from nearmetal.kernels.build import host_bin

    prog = os.path.join(host_bin(mpi), "nm-coupled")
    argv = list(MPMD[mpi])
    for k, (n, args) in enumerate(parts):
        argv += ([":"] if k else []) + [NP[mpi], str(n), prog] + list(args)
    full_env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "NM_CORRUPT")}
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=dict(full_env, **(env or {})),
                          stdin=subprocess.DEVNULL)


def parse(text, **params):
    from nearmetal import kernels

    records = kernels.parse(kernels.get("coupled"), text, params)
    for r in records:
        jsonschema.validate(r, SCHEMA)
    return records


def summary(records, world, atm, ocn, launch, couplings=4):
    """Checks every record; returns {component: checksum}."""
    assert records
    for r in records:
        p = r["params"]
        assert (p["world_size"], p["atm_ranks"], p["ocn_ranks"], p["launch"]) == (world, atm, ocn, launch), p
        assert p["build"] == "portable" and p["simd"] == "sse2"
    counts = {r["metric"]: r["value"] for r in records if r["unit"] == "count"}
    assert counts["exchanges"] == couplings
    assert counts["messages"] >= 2 * couplings and counts["exchanged_values"] > 0
    sums = {}
    for comp, nranks in (("atm", atm), ("ocn", ocn)):
        mx = {r["metric"]: r["value"] for r in records
              if r["params"].get("component") == comp and r["params"].get("rank") == "max"}
        assert set(mx) == TIMES, mx
        assert mx["main_loop_s"] > 0 and mx["compute_s"] > 0
        per_rank = [r for r in records if r["params"].get("component") == comp and isinstance(r["params"].get("rank"), int)]
        assert sorted({r["params"]["rank"] for r in per_rank}) == list(range(nranks))
        for k in range(nranks):
            mine = {r["metric"]: r["value"] for r in per_rank if r["params"]["rank"] == k}
            assert set(mine) == TIMES
            assert all(mine[m] <= mx[m] for m in TIMES)  # the component row is the largest over its ranks
            assert mine["compute_s"] + mine["halo_s"] + mine["exchange_s"] <= mine["main_loop_s"] + 1e-4
        checks = {r["metric"]: r["value"] for r in records if r["params"].get("component") == comp and r["unit"] == ""}
        assert checks["checksum"] == checks["reference_checksum"], checks  # bitwise equal to the serial replay
        sums[comp] = checks["checksum"]
    return sums


@pytest.fixture(scope="module")
def reference():
    """Checksums of the SMALL problem from a plain SPMD run: 1 atm rank, 2 ocn ranks."""
    return summary(bench("--mpi", "mpich", "-n", 3, kargs=["--atm-ranks", "1", *SMALL]), 3, 1, 2, "spmd")


# ----------------------------------------------------------------------------- SPMD

@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_spmd_native(mpi, reference):
    recs = bench("--mpi", mpi, "-n", 3, kargs=["--atm-ranks", "1", *SMALL])
    assert all(r["params"]["mode"] == "native" and r["params"]["mpi"] == mpi for r in recs)
    assert summary(recs, 3, 1, 2, "spmd") == reference


def test_checksums_do_not_depend_on_the_split(reference):
    """2 atm + 1 ocn; 1 atm + 4 ocn (2x2 blocks: walls between ranks); 1 + 1 with 2 threads."""
    assert summary(bench("--mpi", "mpich", "-n", 3, kargs=["--atm-ranks", "2", *SMALL]), 3, 2, 1, "spmd") == reference
    out = nearmetal("bench", "coupled", "--mpi", "mpich", "-n", 5, "--", "--atm-ranks", "1", *SMALL, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "# component ocn: grid=72x36x5 blocks=2x2 " in out.stdout
    assert summary(parse(out.stdout, mode="native", mpi="mpich", ranks=5, threads=1), 5, 1, 4, "spmd") == reference
    recs = bench("--mpi", "openmpi", "-n", 2, "--threads", 2, "--env", "OMP_WAIT_POLICY=passive", kargs=SMALL)
    assert summary(recs, 2, 1, 1, "spmd") == reference


# ----------------------------------------------------------------------------- MPMD

@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_mpmd_native(mpi, reference):
    out = mpmd(mpi, [(1, ["--role", "atm", *SMALL]), (2, ["--role", "ocn", *SMALL])])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# world_size=3 atm_ranks=1 ocn_ranks=2 mode=mpmd" in out.stdout
    assert "Verification PASSED" in out.stdout
    assert summary(parse(out.stdout, mode="native", mpi=mpi, ranks=3, threads=1), 3, 1, 2, "mpmd") == reference


def test_mpmd_ocean_first_and_options_per_component(reference):
    """Ocean on world ranks 0-1, atmosphere on 2; options given only on the command line
    of the component they concern apply to every rank."""
    atm_opts = SMALL[:8]  # --couplings and the --atm-* grid
    ocn_opts = SMALL[8:]
    out = mpmd("mpich", [(2, ["--role", "ocn", *ocn_opts]), (1, ["--role", "atm", *atm_opts])])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# component ocn: grid=72x36x5 blocks=2x1 steps_per_coupling=1 world_ranks=0-1" in out.stdout
    assert "# component atm: grid=48x24x4 blocks=1x1 steps_per_coupling=3 world_ranks=2" in out.stdout
    assert summary(parse(out.stdout, mode="native", mpi="mpich", ranks=3, threads=1), 3, 1, 2, "mpmd") == reference


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_mpmd_through_nearmetal_run(mpi, reference):
    """`nearmetal run` MPMD components (app contexts / hydra blocks): one MPI_COMM_WORLD."""
    out = nearmetal("run", "--mpi", mpi, "-n", 1, "--", "nm-coupled", "--role", "atm", *SMALL, ":", "-n", 2, "--",
                    "nm-coupled", "--role", "ocn", timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert summary(parse(out.stdout, mode="native", mpi=mpi, ranks=3, threads=1), 3, 1, 2, "mpmd") == reference


# -------------------------------------------------------------------- containers

@pytest.mark.parametrize("mode,mpi", [("hybrid", "openmpi"), ("bind", "mpich"), ("hybrid", "mpich")])
def test_in_container(mode, mpi, default_image, reference):
    """The image's own build (its gcc, its MPI or the host's): the same bits as the host's."""
    recs = bench("--mode", mode, "--mpi", mpi, "--image", default_image.name, "-n", 3,
                 kargs=["--atm-ranks", "1", *SMALL])
    assert all(r["params"]["mode"] == mode and r["params"]["runtime"] == "charliecloud" for r in recs)
    assert summary(recs, 3, 1, 2, "spmd") == reference


# ------------------------------------------------------------------- verification

def test_corrupted_exchange_is_detected():
    out = bench("--mpi", "mpich", "-n", 3, "--env", "NM_CORRUPT=1", kargs=["--atm-ranks", "1", *SMALL],
                expect_ok=False)
    assert out.returncode != 0, out.stdout
    assert "verification FAILED: coupling 2: flux message from world rank 0 to world rank 1" in out.stderr, out.stderr
    assert "data changed in the exchange" in out.stderr
    assert "Verification PASSED" not in out.stdout and "Traceback" not in out.stderr


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_mpmd_corruption_exits_nonzero(mpi):
    out = mpmd(mpi, [(1, ["--role", "atm", *SMALL]), (2, ["--role", "ocn"])], env={"NM_CORRUPT": "1"})
    assert out.returncode != 0, out.stdout
    assert "nm-coupled: verification FAILED: coupling 2: flux message from world rank 0" in out.stderr, out.stderr
    assert "Verification PASSED" not in out.stdout


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_single_role_world_is_refused(mpi):
    out = mpmd(mpi, [(1, ["--role", "atm"]), (1, ["--role", "atm"])])
    assert out.returncode == 2, out.stdout + out.stderr
    assert "nm-coupled: no rank has role 'ocn' (world size 2: 2 atm, 0 ocn ranks)" in out.stderr
    assert "Verification" not in out.stdout


def test_bench_refuses_a_split_without_ocean():
    out = bench("--mpi", "mpich", "-n", 3, kargs=["--atm-ranks", "3"], expect_ok=False)
    assert out.returncode != 0
    assert "no rank has role 'ocn'" in out.stderr and "exit status 2" in out.stderr, out.stderr


@pytest.mark.parametrize("parts,message", [
    ([(1, ["--role", "atm", "--couplings", "3"]), (1, ["--role", "ocn", "--couplings", "4"])],
     "--couplings differs between ranks: 3 on world rank 0, 4 on world rank 1"),
    ([(1, ["--role", "atm"]), (1, [])], "--role is given to 1 of 2 ranks"),
    ([(1, ["--role", "atm", "--atm-ranks", "1"]), (1, ["--role", "ocn"])], "--atm-ranks is for SPMD launches"),
    ([(1, ["--role", "atm"]), (1, ["--role", "sea"])], "bad value for --role: 'sea' (atm or ocn) (world rank 1)"),
    ([(2, ["--couplings", "0"])], "bad value for --couplings: '0'"),
    ([(4, ["--atm-nx", "1", "--atm-ny", "1", "--atm-ranks", "2"])],
     "atm grid 1x1x16 is too small for 2 ranks (2x1 blocks)"),
    ([(2, ["--bogus"])], "unknown option '--bogus'"),
])
def test_bad_options_exit_2(parts, message):
    out = mpmd("mpich", parts)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr, out.stderr
    assert "usage: nm-coupled" in out.stderr


# ------------------------------------------------------------------------ parser

def test_parser_reads_every_row_and_skips_noise():
    text = ("# nm-coupled: ...\n"
            "# build=portable simd=sse2 ranks=3 threads=1 mpi=MPICH node_ranks=3 cpus=2\n"
            "# world_size=3 atm_ranks=1 ocn_ranks=2 mode=mpmd\n"
            "#           role   rank  world       block       init_s  main_loop_s    compute_s       halo_s   exchange_s\n"
            "  rank       atm      0      0       48x24     0.1 0.5 0.2 0.01 0.25\n"
            "  rank       ocn      1      2       36x36     0.1 0.4 0.1 0.02 0.2\n"
            "  rank       ocn      x      2       36x36     0.1 0.4 0.1 0.02 0.2\n"
            "  component  atm      1     0.1 0.5 0.2 0.01 0.25\n"
            "  component  ocn      2     0.1 0.45 0.15 0.02 0.2\n"
            "exchanges 4\nmessages 16\nexchanged_values 1234\n"
            "checksum atm 1.5e+03\nreference_checksum atm 1.5e+03\nchecksum ocn x\n"
            "Verification PASSED: ...\n")
    recs = parse(text, mode="native", mpi="mpich", ranks=3, threads=1)
    assert len(recs) == 5 + 5 + 5 + 5 + 3 + 2
    ocn1 = {r["metric"]: r for r in recs if r["params"].get("component") == "ocn" and r["params"].get("rank") == 1}
    assert ocn1["main_loop_s"]["value"] == 0.4 and ocn1["main_loop_s"]["params"]["world_rank"] == 2
    assert ocn1["exchange_s"]["unit"] == "s" and ocn1["exchange_s"]["params"]["launch"] == "mpmd"
    (vals,) = [r for r in recs if r["metric"] == "exchanged_values"]
    assert vals["value"] == 1234 and vals["unit"] == "count"
    assert {r["params"]["component"] for r in recs if r["metric"] == "checksum"} == {"atm"}


def test_a_study_runs_the_coupled_model_as_a_heterogeneous_job(tmp_path, default_image):
    """A study benchmark with `components` (seed 000's coupled-mpmd): one launcher, one
    MPI_COMM_WORLD, each component with its own arguments, natively and in both container
    modes with both MPIs; every run says mpmd and computes the same checksums."""
    import sqlite3

    small = ", ".join(f'"{a}"' for a in SMALL)
    study = tmp_path / "s.toml"
    study.write_text(f"""
[study]
name = "mpmd"
repetitions = 1
warmup = 0
[matrix]
mode = ["native", "hybrid", "bind"]
runtime = ["charliecloud"]
mpi = ["openmpi", "mpich"]
[[benchmark]]
name = "coupled-mpmd"
kernel = "coupled"
args = ["--role", "ocn", {small}]
components = [{{ranks = 1, args = ["--role", "atm", {small}]}}, {{ranks = 2}}]
""")
    db = tmp_path / "s.db"
    out = nearmetal("study", study, "--db", db, "--no-progress", "--out", tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    con = sqlite3.connect(db)
    runs = con.execute("SELECT run_key, status, argv_json FROM runs").fetchall()
    assert len(runs) == 6 and all(status == "ok" for _, status, _ in runs), runs
    assert all(key.startswith("coupled-mpmd|n=3|") for key, _, _ in runs)  # the components' ranks together
    for _, _, argv in runs:  # the second component runs the benchmark's own args
        words = json.loads(argv)
        assert words.count(":") == 1 and words.count("--role") == 2
        assert words.index("atm") < words.index(":") < words.index("ocn")
    rows = con.execute("SELECT point_json, value FROM records WHERE metric = 'checksum'").fetchall()
    points = [json.loads(p) for p, _ in rows]
    assert {(p["launch"], p["atm_ranks"], p["ocn_ranks"]) for p in points} == {("mpmd", 1, 2)}
    by_role = {}
    for (p, value), point in zip(rows, points):
        by_role.setdefault(point["component"], set()).add(value)
    assert set(by_role) == {"atm", "ocn"} and all(len(v) == 1 for v in by_role.values()), by_role
