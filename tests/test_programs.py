"""Program benchmarks for real: any MPI program in a study (command = [...]) and in
`bench --command`, its figures of merit read from what it prints and writes, inputs staged
into a fresh working directory per run. nearmetal's own OSU-format kernels serve as the
plain programs here (the OSU preset is tested that way, as the issue asks); the real
applications (GROMACS, HPCC, Quantum ESPRESSO) are in test_applications.py."""

import glob
import json
import os
import shutil
import sqlite3

import jsonschema
import pytest

from conftest import REPO, assert_one_line_error, nearmetal

pytestmark = pytest.mark.integration

SCHEMA = json.loads((REPO / "src/nearmetal/schemas/bench-record.schema.json").read_text())


def write(tmp_path, body, name="app"):
    path = tmp_path / f"{name}.toml"
    path.write_text(f"""
[study]
name = "{name}"
repetitions = 3
seed = 3
timeout = 120
[baseline]
mode = "native"
[matrix]
mode = ["native", "bind"]
runtime = ["charliecloud"]
mpi = ["openmpi", "mpich"]
[[benchmark]]
""" + body)
    return path


def run_study(tmp_path, study, **kw):
    """(the study's database, the finished `nearmetal study` process): its report in tmp_path."""
    db = tmp_path / "app.db"
    return db, nearmetal("study", str(study), "--db", str(db), "--out", str(tmp_path), "--no-progress", **kw)


def rows(db, sql):
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_an_osu_format_program_as_a_study_benchmark(tmp_path, default_image):
    study = write(tmp_path, 'command = ["nm-latency", "-m", "8:64"]\npreset = "osu"\n')
    db = tmp_path / "app.db"
    out = nearmetal("study", str(study), "--db", str(db), "--out", str(tmp_path / "report"), "--no-progress")
    assert out.returncode == 0, out.stderr
    assert rows(db, "select status, count(*) from runs where warmup=0 group by status") == [("ok", 12)]
    got = rows(db, "select distinct r.variant, x.metric, x.point_json, x.unit from runs r join records x "
                   "on x.run_id = r.id where r.variant = 'native/mpich' order by x.metric, x.point_json")
    assert [(m, json.loads(p), u) for _, m, p, u in got] == [
        ("latency", {"size": 16}, "us"), ("latency", {"size": 32}, "us"), ("latency", {"size": 64}, "us"),
        ("latency", {"size": 8}, "us"), ("wall_time", {}, "s")]
    assert rows(db, "select distinct kernel from runs") == [("command",)]
    assert (tmp_path / "report" / "report.html").is_file()


def test_regex_foms_inputs_and_a_file_fom(tmp_path):
    # A program that reads its input from the working directory and writes a log there:
    # nm-latency's arguments come from a staged file through a shell (as many job scripts do).
    (tmp_path / "args.txt").write_text("-m 8:8\n")
    study = write(tmp_path, '''
name = "wrapped"
command = ["/bin/sh", "-c", "nm-latency $(cat args.txt) > solver.log; echo 'Run completed'"]
inputs = ["%s"]
mode = ["native"]
mpi = ["openmpi"]
[[benchmark.fom]]
name = "lat8"
regex = '^8\\s+([0-9.]+)'
unit = "us"
file = "solver.log"
success = 'Run completed'
''' % (tmp_path / "args.txt"))
    db, out = run_study(tmp_path, study, env={"PATH": f"{_kernel_dir('openmpi')}:/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    values = rows(db, "select x.value from runs r join records x on x.run_id = r.id "
                      "where x.metric = 'lat8' and r.variant = 'native/openmpi' and r.warmup = 0")
    assert len(values) == 3 and all(0 < v < 1000 for (v,) in values)
    # the working directory of the cell's runs, fresh for each: the input and the program's log
    workdirs = list(tmp_path.glob("nm-runs/*native*openmpi*"))
    assert len(workdirs) == 1 and sorted(p.name for p in workdirs[0].iterdir()) == ["args.txt", "solver.log"]


def test_a_fom_never_found_fails_the_run_with_the_reason(tmp_path):
    # keep_going: every run is tried (without it the runs after the first are skipped: test_failfast.py)
    study = write(tmp_path, '''
command = ["nm-latency", "-m", "8:8"]
mode = ["native"]
keep_going = true
[[benchmark.fom]]
name = "gflops"
regex = 'GFLOP/s: ([0-9.]+)'
unit = "GFLOP/s"
''')
    db, _ = run_study(tmp_path, study)
    tails = rows(db, "select status, stderr_tail from runs where warmup = 0")
    assert tails and all(s == "failed" and "FOM 'gflops' not found in the output" in t for s, t in tails)


def test_bench_command_prints_the_figures_of_merit():
    out = nearmetal("bench", "--command", "--preset", "osu", "--mpi", "mpich", "--json", "--",
                    "nm-latency", "-m", "4:8")
    assert out.returncode == 0, out.stderr
    recs = [json.loads(line) for line in out.stdout.splitlines()]  # records only: the program's output is on stderr
    for r in recs:
        jsonschema.validate(r, SCHEMA)  # the form kernels' records have
    assert [(r["metric"], r["params"].get("size")) for r in recs] == [("latency", 4), ("latency", 8),
                                                                      ("wall_time", None)]
    assert all(r["kernel"] == "command" and r["params"]["mpi"] == "mpich" for r in recs)
    assert "# OSU MPI Latency Test" in out.stderr or "Latency" in out.stderr


def test_bench_command_with_a_regex_fom_in_a_container(default_image):
    out = nearmetal("bench", "--command", "--mode", "bind", "--mpi", "openmpi",
                    "--fom", "lat:us:^8\\s+([0-9.]+)", "--", "nm-latency", "-m", "8:8")
    assert out.returncode == 0, out.stderr
    line = [l for l in out.stdout.splitlines() if l.startswith("nearmetal: lat ")]
    assert len(line) == 1 and line[0].endswith(" us")


@pytest.mark.parametrize("argv, expect", [
    (["--command", "--fom", "t:s:Time: [0-9.]+", "--", "true"], "needs a group"),
    (["--command", "--fom", "no-colons", "--", "true"], "write NAME:UNIT:REGEX"),
    (["--command", "--preset", "nosuch", "--", "true"], "unknown preset 'nosuch'"),
    (["--preset", "osu", "--", "true"], "add --command"),
    (["--command"], "needs the program after '--'"),
    (["latency", "--command", "--", "true"], "drop one of them"),
])
def test_bench_command_bad_input(argv, expect):
    err = assert_one_line_error(nearmetal("bench", *argv))
    assert expect in err


def test_bench_command_fom_missing_is_an_error():
    err = assert_one_line_error(nearmetal("bench", "--command", "--mpi", "mpich", "--fom", "x:s:NEVER ([0-9]+)",
                                          "--", "nm-latency", "-m", "8:8"))
    assert "FOM 'x' not found in the output" in err


def _kernel_dir(family):
    from nearmetal import kernels

    return kernels.host_bin(family)


def test_a_large_input_is_bound_read_only_not_copied(tmp_path, default_image):
    big = tmp_path / "big.dat"
    with open(big, "wb") as f:  # over the 64 MiB line: shown, never copied
        f.truncate((64 << 20) + 1)
    study = write(tmp_path, f'''
name = "big"
command = ["/bin/sh", "-c", "wc -c < big.dat; if touch big.dat 2>/dev/null; then echo writable=1; else echo writable=0; fi"]
inputs = ["{big}"]
mpi = ["mpich"]
ranks = [1]
runtime = ["bwrap"]  # Charliecloud 0.31 has no read-only bind (ch-run -b is read-write)
[[benchmark.fom]]
name = "size"
regex = '^([0-9]+)$'
unit = "bytes"
[[benchmark.fom]]
name = "writable"
regex = '^writable=([01])$'
unit = "flag"
''')
    db, out = run_study(tmp_path, study)
    assert out.returncode == 0, out.stderr
    got = rows(db, "select r.variant, x.metric, x.value from runs r join records x on x.run_id = r.id "
                   "where r.warmup = 0 and x.metric in ('size', 'writable')")
    assert {(v, m, x) for v, m, x in got} == {
        ("native/mpich", "size", (64 << 20) + 1), ("native/mpich", "writable", 1),  # natively: your file itself
        ("bind/bwrap/mpich/default", "size", (64 << 20) + 1),
        ("bind/bwrap/mpich/default", "writable", 0)}                        # in a container: read-only
    assert (next(tmp_path.glob("nm-runs/*native*mpich*")) / "big.dat").is_symlink()
    assert (next(tmp_path.glob("nm-runs/*bind*mpich*")) / "big.dat").stat().st_size == 0  # the bind's placeholder


def test_a_missing_input_refuses_the_study_before_anything_runs(tmp_path):
    study = write(tmp_path, f'command = ["nm-latency"]\ninputs = ["{tmp_path}/absent.nml"]\n')
    db = tmp_path / "app.db"
    err = assert_one_line_error(nearmetal("study", str(study), "--db", str(db)))
    assert "input" in err and "absent.nml does not exist" in err
    assert not db.exists()


# -- presets written as TOML files (docs/applications.md, "Writing a preset") ----------------

EXAMPLE_PRESET = os.path.join(os.path.dirname(__file__), "..", "examples", "presets", "lammps.toml")
# What LAMMPS prints, close enough for the example preset's patterns.
FAKE_LAMMPS = ["/bin/sh", "-c", "echo 'LAMMPS (2 Aug 2023)'; echo 'Loop time of 1.25 on 2 procs for 100 steps'; "
               "echo 'Performance: 1.5 tau/day, 80.5 timesteps/s'; echo 'Total wall time: 0:00:01'"]


def test_bench_command_finds_the_docs_example_preset_in_the_current_directory(tmp_path):
    shutil.copy(EXAMPLE_PRESET, tmp_path / "lammps.toml")
    out = nearmetal("bench", "--command", "--preset", "lammps", "--mpi", "openmpi", "-n", "2", "--json", "--",
                    *FAKE_LAMMPS, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    recs = {r["metric"]: r for r in (json.loads(l) for l in out.stdout.splitlines() if l.startswith("{"))}
    assert sorted(recs) == ["loop_time", "timesteps_per_s", "wall_time"]
    assert recs["timesteps_per_s"]["value"] == 80.5 and recs["loop_time"]["value"] == 1.25


def test_a_study_finds_a_preset_file_in_the_nearmetal_home(tmp_path):
    home = tmp_path / "home"
    (home / "presets").mkdir(parents=True)
    shutil.copy(EXAMPLE_PRESET, home / "presets" / "lammps.toml")
    study = tmp_path / "md.toml"
    study.write_text(f"""
[study]
name = "md"
repetitions = 2
timeout = 120
[baseline]
mode = "native"
[matrix]
mode = ["native"]
mpi = ["mpich"]
[[benchmark]]
name = "lj"
ranks = [1]
command = {json.dumps(FAKE_LAMMPS)}
preset = "lammps"
""")
    db = tmp_path / "md.db"
    env = {"NEARMETAL_HOME": str(home)}
    # the study reads images from the home: this one runs natively only, so an empty home serves
    out = nearmetal("study", str(study), "--db", str(db), "--out", str(tmp_path / "report"), "--no-progress",
                    env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = rows(db, "select x.metric, x.value, x.unit from runs r join records x on x.run_id = r.id "
                   "where r.warmup = 0 and x.metric != 'wall_time' order by x.metric")
    assert got == [("loop_time", 1.25, "s")] * 2 + [("timesteps_per_s", 80.5, "steps/s")] * 2
    listed = nearmetal("presets", "--json", env=env, cwd=tmp_path)
    row = [r for r in json.loads(listed.stdout) if r["name"] == "lammps"]
    assert row == [{"name": "lammps", "source": str(home / "presets" / "lammps.toml"), "title": "LAMMPS",
                    "foms": "timesteps_per_s (steps/s), loop_time (s)", "command": ["lmp", "-in", "in.lj"],
                    "problem": None}]


def test_a_broken_preset_file_refuses_the_study_before_anything_runs(tmp_path):
    (tmp_path / "broken.toml").write_text('[[fom]]\nname = "x"\nregex = "no group"\n')
    study = write(tmp_path, 'command = ["/bin/true"]\npreset = "broken"\n')
    out = nearmetal("study", str(study), "--db", str(tmp_path / "app.db"), "--no-progress", cwd=tmp_path)
    err = assert_one_line_error(out)
    assert "broken.toml: fom[0].regex: needs a group" in err and "benchmark[0].preset" in err
    assert not (tmp_path / "app.db").exists() or rows(tmp_path / "app.db", "select count(*) from runs") == [(0,)]


def test_dry_run_shows_the_working_directory_the_study_will_use(tmp_path, monkeypatch):
    """--dry-run prints the exact launch: a program's working directory lies beside the
    database the study would use (--db, else results/NAME/), absolute, as the real runs have it."""
    study = write(tmp_path, '''
name = "where"
command = ["/bin/true"]
mode = ["native", "hybrid"]
runtime = ["charliecloud"]
mpi = ["openmpi"]
''')
    out = nearmetal("study", str(study), "--dry-run", "--db", str(tmp_path / "x" / "s.db"))
    assert out.returncode == 0, out.stderr
    assert f"--bind={tmp_path}/x/nm-runs/" in out.stdout, out.stdout
    monkeypatch.chdir(tmp_path)
    out = nearmetal("study", str(study), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert f"--bind={tmp_path}/results/app/nm-runs/" in out.stdout, out.stdout


def openmpi_size_program(tmp_path):
    """An Open MPI program whose rank 0 prints the job's size (size=N)."""
    import subprocess

    src, exe = tmp_path / "size.c", tmp_path / "size"
    src.write_text('#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { int n, r; MPI_Init(&c, &v);'
                   ' MPI_Comm_size(MPI_COMM_WORLD, &n); MPI_Comm_rank(MPI_COMM_WORLD, &r);'
                   ' if (r == 0) printf("size=%d\\n", n); MPI_Finalize(); return 0; }\n')
    subprocess.run(["mpicc.openmpi", "-o", str(exe), str(src)], check=True, timeout=120)
    return exe


def test_a_script_that_starts_a_program_of_the_other_mpi_fails_its_runs_not_stores_one_ranks_numbers(tmp_path):
    """The preflight sees /bin/sh, which links no MPI; the Open MPI program the script starts
    under MPICH's launcher initialises MPI as a job of one rank on every rank and exits 0. The
    ranks' evidence shows it (MPI_Comm_size 1 where the launch has 2): that cell's first run
    fails with the reason and its other runs are skipped, while the cells whose MPI is the
    program's own measure one 2-rank job."""
    exe = openmpi_size_program(tmp_path)
    study = write(tmp_path, f'''
name = "wrapped"
command = ["/bin/sh", "-c", "exec {exe}"]
mode = ["native"]
ranks = [2]
[[benchmark.fom]]
name = "size"
regex = 'size=([0-9]+)'
unit = "ranks"
''')
    db, out = run_study(tmp_path, study)
    got = rows(db, "select r.variant, r.status, r.stderr_tail, group_concat(x.value) from runs r left join records x "
                   "on x.run_id = r.id and x.metric = 'size' group by r.id order by r.id")
    mpich = [g[1:] for g in got if g[0] == "native/mpich"]
    openmpi = [g[1:] for g in got if g[0] == "native/openmpi"]
    failed = [g for g in mpich if g[0] == "failed"]
    assert len(failed) == 1 and "is not one MPI job: 2 processes" in failed[0][1] and failed[0][2] is None, mpich
    assert len(mpich) > 1 and all(s == "skipped" and "the cell of benchmark 'wrapped' on native/mpich stopped "
                                  "after a run" in t for s, t, _ in mpich if (s, t, _) != failed[0]), mpich
    assert openmpi and all(status == "ok" and values == "2.0" for status, _, values in openmpi), openmpi
    said = " ".join(out.stderr.split())  # the console line keeps the remedy; the skipped runs show the output once
    assert "the cell of benchmark 'wrapped' on native/mpich stopped after a run: the run exited 0 but is not one " \
           "MPI job: 2 processes" in said and "give its cells the MPI it links (mpi = ...)" in said, out.stderr
    skipped_text = next(t for s, t, _ in mpich if s == "skipped")
    assert skipped_text.count("is not one MPI job") == 1 and "size=1" in skipped_text, skipped_text


def test_bench_under_evidence_fails_a_script_starting_the_other_mpi_and_reads_no_stale_file(tmp_path):
    """`bench --command --evidence DIR`: under MPICH's launcher the wrapped Open MPI program is
    two jobs of one rank; bench fails with the reason and prints no record. The same DIR then
    serves a good 2-rank launch under Open MPI: the earlier run's files are not read again.
    Without --evidence, bench checks the same in a private directory it removes."""
    exe, where = openmpi_size_program(tmp_path), tmp_path / "ev"
    argv = ["--evidence", str(where), "-n", "2", "--fom", "size:ranks:size=([0-9]+)", "--", "/bin/sh", "-c",
            f"exec {exe}"]
    bad = nearmetal("bench", "--command", "--mpi", "mpich", *argv)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    last = bad.stderr.strip().splitlines()[-1]
    assert last.startswith("nearmetal bench: error: the run exited 0 but is not one MPI job: 2 processes ("), last
    assert "run it with --mpi naming the MPI it links, or rebuild it against mpich" in last, last
    assert "nearmetal: size" not in bad.stdout, bad.stdout
    assert len(list(where.glob("ev-*.json"))) >= 2  # the files stay for the user
    good = nearmetal("bench", "--command", "--mpi", "openmpi", *argv)
    assert good.returncode == 0, good.stderr
    assert "nearmetal: size = 2 ranks" in good.stdout, good.stdout
    # without --evidence the ranks still record it, into a directory bench removes
    stages = set(glob.glob(f"/tmp/nearmetal-{os.getuid()}/evidence-*"))
    bare = nearmetal("bench", "--command", "--mpi", "mpich", *argv[2:])
    assert bare.returncode == 2 and "is not one MPI job" in bare.stderr.strip().splitlines()[-1], bare.stderr
    assert set(glob.glob(f"/tmp/nearmetal-{os.getuid()}/evidence-*")) <= stages  # nothing left behind
    # --no-evidence: nothing preloaded, as a study's evidence = false; so nothing to check either
    unchecked = nearmetal("bench", "--command", "--no-evidence", "--mpi", "mpich", *argv[2:])
    assert unchecked.returncode == 0 and "nearmetal: size = 1 ranks" in unchecked.stdout, unchecked.stderr
    both = nearmetal("bench", "--command", "--no-evidence", "--mpi", "mpich", *argv)
    assert both.returncode == 2 and "--evidence DIR and --no-evidence contradict each other" in both.stderr
