"""Mistakes refused before any run, and runs that cannot give results ended early (issue 28,
items 4 and 6), with real processes: a run that hangs on its 4th start is ended after the
limit its cell's earlier runs set, stored as hung with its processes' state and run once
more; a misspelt image and an unknown preset are refused by --dry-run and by the study; a
figure of merit that never matches stops its benchmark after the first run while the
other benchmarks run."""

import os
import sqlite3
import textwrap
import time

import pytest

from conftest import assert_one_line_error, nearmetal

SLEEP_MARK = "86399"  # the hung run's `sleep` argument: no other process on the machine has it


def _rows(db, sql):
    with sqlite3.connect(db) as c:
        return c.execute(sql).fetchall()


def _hanging_program(tmp_path, hang_at):
    """A program that prints a figure of merit and exits, except on its `hang_at`-th start
    (counted in a file), when it sleeps far past any limit."""
    script = tmp_path / "hangs.sh"
    counter = tmp_path / "count"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 ))
        echo "$n" > {counter}
        if [ "$n" -eq {hang_at} ]; then exec sleep {SLEEP_MARK}; fi
        echo "value: 1.5"
        """))
    script.chmod(0o755)
    return script


def _study(tmp_path, body, name="ff", study_extra=""):
    path = tmp_path / f"{name}.toml"
    path.write_text(f"""
[study]
name = "{name}"
repetitions = 5
warmup = 0
seed = 1
timeout = 300
{study_extra}
[matrix]
mode = ["native"]
mpi = ["mpich"]
ranks = [1]
{body}""")
    return path


def _alive_with(mark):
    """PIDs of processes whose command line holds `mark`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_hung_run_is_ended_at_its_cells_limit_stored_with_its_state_and_run_once_more(tmp_path):
    script = _hanging_program(tmp_path, hang_at=4)
    path = _study(tmp_path, f'''
[[benchmark]]
name = "hangs"
command = ["{script}"]
[[benchmark.fom]]
name = "value"
regex = 'value: ([0-9.]+)'
unit = "s"
''', study_extra="hang_floor_s = 2")
    db = tmp_path / "ff.db"
    t0 = time.monotonic()
    out = nearmetal("study", path, "--db", db, "--no-progress", "--out", tmp_path, timeout=600)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    rows = _rows(db, "SELECT run_key, status, wall_s, block, stderr_tail FROM runs ORDER BY position")
    statuses = [s for _, s, _, _, _ in rows]
    assert statuses == ["ok", "ok", "ok", "hung", "ok", "ok"], rows
    earlier = sorted(w for _, _, w, _, _ in rows[:3])
    limit = max(2.0, 10 * earlier[1])  # 10x the median of the cell's 3 earlier runs, at least the floor
    key, _, wall, block, tail = rows[3]
    assert limit <= wall < limit + 15 and took < 300, (wall, limit, took)  # not the 300 s timeout
    assert f"nearmetal: hung: no end after {limit:.3g} s (10x the median" in tail, tail
    assert "run once more after the runs planned" in tail
    # the state of its processes, read before they were ended: the sleeping program among them
    state = tail[tail.index("its processes when it was ended"):].splitlines()[1:]
    sleeping = [line.split() for line in state if line.split()[1] == "sleep"]
    assert sleeping and sleeping[0][2] == "S" and sleeping[0][0].isdigit(), state
    assert any(line.split()[1].startswith("hydra") or line.split()[1] == "mpiexec.hydra" for line in state), state
    # the repeat: the same cell and block, after the runs planned; never repeated again
    again_key, again_status, _, again_block, _ = rows[-1]
    assert again_key == key + "~again" and again_status == "ok" and again_block == block
    assert not _alive_with(SLEEP_MARK)  # the hung tree ended with it
    assert "hung: ended, and its cell is run once more" in " ".join(out.stderr.split())
    values = _rows(db, "SELECT COUNT(*) FROM records x JOIN runs r ON r.id = x.run_id WHERE r.status = 'hung'")
    assert values == [(0,)]  # nothing of the hung run is analysed


def test_the_repeat_of_a_hung_run_is_not_repeated_again(tmp_path):
    """Runs 4 and 6 hang: run 6 is the repeat of run 4, ended and stored hung, never run a third time."""
    script = tmp_path / "hangs.sh"
    counter = tmp_path / "count"
    script.write_text(f"""#!/bin/sh
n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 ))
echo "$n" > {counter}
if [ "$n" -eq 4 ] || [ "$n" -eq 6 ]; then exec sleep {SLEEP_MARK}; fi
echo "value: 1.5"
""")
    script.chmod(0o755)
    path = _study(tmp_path, f'''
[[benchmark]]
name = "hangs"
command = ["{script}"]
[[benchmark.fom]]
name = "value"
regex = 'value: ([0-9.]+)'
unit = "s"
''', study_extra="hang_floor_s = 2")
    db = tmp_path / "ff.db"
    out = nearmetal("study", path, "--db", db, "--no-progress", "--out", tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = _rows(db, "SELECT run_key, status, stderr_tail FROM runs ORDER BY position")
    assert [s for _, s, _ in rows] == ["ok", "ok", "ok", "hung", "ok", "hung"], rows
    assert rows[-1][0].endswith("~again") and "not run again (it was itself the repeat" in rows[-1][2]
    assert not _alive_with(SLEEP_MARK)


def test_a_misspelt_image_is_refused_by_the_dry_run_and_the_study_with_the_closest_name(tmp_path):
    path = tmp_path / "img.toml"
    path.write_text("""
[study]
name = "img"
repetitions = 2
[matrix]
mode = ["native", "hybrid"]
runtime = ["charliecloud"]
mpi = ["mpich"]
image = ["defualt"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8"]
""")
    dry = nearmetal("study", path, "--dry-run")
    err = assert_one_line_error(dry)
    assert "image 'defualt' of 1 cell: no such image (known images: default, " in err
    assert err.endswith("the closest is 'default')"), err
    assert "latency|n=2|t=1|native/mpich" in dry.stdout  # the plan is still shown
    db = tmp_path / "r" / "img.db"
    real = nearmetal("study", path, "--db", db, "--no-progress")
    assert assert_one_line_error(real) == err
    assert not db.exists()  # refused before a database was made, so before any run


def test_an_unknown_preset_is_refused_before_any_run_with_the_closest_name(tmp_path):
    path = _study(tmp_path, '''
[[benchmark]]
command = ["true"]
preset = "gromac"
''')
    for args in (["--dry-run"], ["--db", tmp_path / "p.db"]):
        err = assert_one_line_error(nearmetal("study", path, *args))
        assert "benchmark[0].preset: unknown preset 'gromac'" in err and "the closest is 'gromacs'" in err, err
    assert not (tmp_path / "p.db").exists()


@pytest.mark.parametrize("check, reason", [
    ('[[benchmark.fom]]\nname = "gflops"\nregex = \'GFLOP/s: ([0-9.]+)\'\nunit = "GFLOP/s"\n',
     "FOM 'gflops' not found in the output"),
    ('success = \'^Run completed\'\n[[benchmark.fom]]\nname = "steps"\nregex = \'ran: ([0-9]+) steps\'\nunit = "s"\n',
     "did not print what `success` asks for"),
], ids=["fom", "success"])
def test_a_fom_that_never_matches_stops_its_benchmark_after_its_first_run_and_the_others_run(tmp_path, check,
                                                                                           reason):
    good = _hanging_program(tmp_path, hang_at=0)  # never hangs: prints "value: 1.5"
    path = _study(tmp_path, f'''
[[benchmark]]
name = "nomatch"
command = ["/bin/sh", "-c", "echo 'the program ran: 3 steps'"]
{check}
[[benchmark]]
name = "good"
command = ["{good}"]
[[benchmark.fom]]
name = "value"
regex = 'value: ([0-9.]+)'
unit = "s"
''')
    db = tmp_path / "ff.db"
    out = nearmetal("study", path, "--db", db, "--no-progress", "--out", tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = _rows(db, "SELECT benchmark, status, wall_s, stderr_tail FROM runs ORDER BY position")
    nomatch = [r for r in rows if r[0] == "nomatch"]
    assert [s for _, s, _, _ in nomatch] == ["failed"] + ["skipped"] * 4, nomatch
    assert reason in nomatch[0][3]
    for _, _, wall, tail in nomatch[1:]:
        assert wall == 0.0 and tail.startswith("skipped: benchmark 'nomatch' stopped after its first run")
        assert reason in tail and "keep_going = true" in tail
        assert "the end of that run's output: the program ran: 3 steps" in tail
    assert [s for b, s, _, _ in rows if b == "good"] == ["ok"] * 5
    said = " ".join(out.stderr.split())
    assert "benchmark 'nomatch' stopped after its first run" in said and "its 4 other runs are skipped" in said
    terminal = " ".join(out.stdout.split())  # the report's failures headline counts them and says why
    assert "4 runs of nomatch skipped: benchmark 'nomatch' stopped after its first run" in terminal, terminal


def test_keep_going_runs_every_run_of_a_benchmark_whose_fom_never_matches(tmp_path):
    path = _study(tmp_path, '''
[[benchmark]]
name = "nomatch"
command = ["/bin/sh", "-c", "echo nothing"]
keep_going = true
[[benchmark.fom]]
name = "gflops"
regex = 'GFLOP/s: ([0-9.]+)'
unit = "GFLOP/s"
''')
    db = tmp_path / "ff.db"
    out = nearmetal("study", path, "--db", db, "--no-progress", "--out", tmp_path, timeout=600)
    # every run tried, and every run failed: the report is written, and the study fails (nothing measured)
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].endswith(
        "no finished runs in study 'ff': 5 failed; see why in the report's failures"), out.stderr
    assert (tmp_path / "report.html").exists()
    assert [s for (s,) in _rows(db, "SELECT status FROM runs")] == ["failed"] * 5
    assert "stopped after its first run" not in out.stderr



def test_a_runtime_not_installed_is_refused_unless_skip_leaves_its_cells_out(tmp_path):
    """A machine without ch-run: PATH is /usr/bin and /bin as links, less ch-run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for name in os.listdir(d):
            if not name.startswith("ch-") and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(os.path.join(d, name))
    env = {"PATH": str(bin_dir)}
    text = """
[study]
name = "rt"
repetitions = 2
{extra}
[matrix]
mode = ["native", "hybrid"]
runtime = ["charliecloud", "bwrap"]
mpi = ["mpich"]
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8"]
"""
    path = tmp_path / "rt.toml"
    path.write_text(text.format(extra=""))
    err = assert_one_line_error(nearmetal("study", path, "--dry-run", env=env))
    assert err.endswith("cannot run: runtime charliecloud of 1 cell: ch-run is not installed; [study] "
                        "missing_runtimes = \"skip\" leaves such cells out instead"), err
    assert "bwrap" not in err  # installed, and it starts here
    path.write_text(text.format(extra='missing_runtimes = "skip"'))
    skip = nearmetal("study", path, "--dry-run", env=env)
    assert skip.returncode == 0, skip.stderr
    assert "charliecloud is not installed here: its 1 cells are left out of study 'rt'" in skip.stdout
    assert "charliecloud" not in skip.stdout.replace("charliecloud is not installed here", "")


def test_the_reports_name_a_failure_by_the_programs_own_line_not_the_launchers_banner(tmp_path):
    """Open MPI appends 'Primary job terminated normally ... Exit code' to a rank's non-zero
    exit: the reports showed that banner's last line as why (walk-through 46)."""
    path = _study(tmp_path, '''
[[benchmark]]
name = "broken"
command = ["/bin/sh", "-c", "echo 'solver: cannot open input.nml: No such file or directory' >&2; exit 3"]
keep_going = true
''').read_text().replace('mpi = ["mpich"]', 'mpi = ["openmpi"]').replace("repetitions = 5", "repetitions = 1")
    (tmp_path / "ff.toml").write_text(path)
    db = tmp_path / "ff.db"
    out = nearmetal("study", tmp_path / "ff.toml", "--db", db, "--no-progress", "--out", tmp_path, timeout=600)
    assert out.returncode == 2, out.stderr
    (tail,) = [t for (t,) in _rows(db, "SELECT stderr_tail FROM runs")]
    assert "Primary job  terminated normally" in tail or "Exit code" in tail, tail  # the banner is there
    why = "solver: cannot open input.nml: No such file or directory"
    import html

    assert f"<td>{html.escape(why)}</td>" in (tmp_path / "report.html").read_text()
    said = " ".join((out.stdout + out.stderr).split())
    assert f"(failed, exit status 3): {why}; stderr tail:" in said, said


def test_report_of_a_study_running_now_names_its_runner_not_run_it_first(tmp_path):
    """`report` while a study's first runs are under way said 'no finished runs ... run it
    first'; explain named the PID writing the database (walk-through 46)."""
    import signal
    import subprocess

    from conftest import NEARMETAL

    path = _study(tmp_path, '''
[[benchmark]]
name = "nap"
command = ["/bin/sh", "-c", "sleep 60; echo 'value: 1'"]
[[benchmark.fom]]
name = "value"
regex = 'value: ([0-9.]+)'
unit = "s"
''')
    db = tmp_path / "ff.db"
    study = subprocess.Popen([str(NEARMETAL), "study", str(path), "--db", str(db), "--no-progress"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not _alive_with("sleep 60") and time.monotonic() < deadline:
            time.sleep(0.1)
        err = assert_one_line_error(nearmetal("report", "--db", db, "--format", "md", "--out", tmp_path / "r"))
        assert f"report of study 'ff' (no run finished yet) in {db}: the database is being written by PID " \
               f"{study.pid} (study 'ff')" in err, err
    finally:
        study.send_signal(signal.SIGINT)
        study.wait(timeout=60)
