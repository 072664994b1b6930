"""A busy machine, for real (study/execute/machine_check.py, study/execute/budget_check.py): with a CPU hog
of this test's own on one of the cores, `nearmetal study` with a long max_time either waits
for a quiet machine and decides, or stops within 60 s of its start with the reason and the
advice — in its output, its stored record and its report — and never spends its budget
without saying why. The hog is killed however the test ends, and dies with the test's
process even when that is killed (PR_SET_PDEATHSIG)."""

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import nearmetal

# Pinned to one core, and killed by the kernel when this test's process dies.
HOG = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the parent died before prctl: nothing to burn for
os.sched_setaffinity(0, {0})
while True:
    pass
"""

STUDY = """\
[study]
name = "{name}"
min_repetitions = 3
max_repetitions = 300
max_time = 3000
margin = 0.01
warmup = 1
seed = 7
{extra}
[baseline]
variant = "a"
[[variant]]
name = "a"
mode = "native"
mpi = "mpich"
[[variant]]
name = "b"
mode = "native"
mpi = "mpich"
[[benchmark]]
kernel = "latency"
args = ["-m", "8:8", "-i", "200"]
"""

DECIDED_WITHIN_S = 60 + 60  # the 60 s, and as much again for this shared, busy machine


class Hog:
    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", HOG, str(os.getpid())])
        time.sleep(0.5)
        assert self.proc.poll() is None, "the CPU hog did not start"
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def _stored(db):
    from nearmetal.study.execute import machine_check
    from nearmetal.study.store.store import Store

    with Store(db, readonly=True) as store:
        sid = store.studies()[0]["id"]
        runs = store.runs(sid)
        return machine_check.load(store, sid), runs


def _decided_everything(db):
    from nearmetal.analysis.analyze import analyze
    from nearmetal.study.store.store import Store

    with Store(db, readonly=True) as store:
        points = [p for p in analyze(store)["points"] if p.get("comparison")]
    return bool(points) and all(p["comparison"]["verdict"] != "inconclusive" for p in points)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the hog takes one of two cores")
@pytest.mark.parametrize("extra", ["", "quiet = true\nquiet_wait = 8"])
def test_a_study_next_to_a_cpu_hog_says_why_at_once(tmp_path, extra, host_mpis):
    name = "hogged" if not extra else "hushed"
    study = tmp_path / f"{name}.toml"
    study.write_text(STUDY.format(name=name, extra=extra))
    db = tmp_path / f"{name}.db"
    with Hog() as hog:
        t0 = time.monotonic()
        out = nearmetal("study", study, "--db", db, "--no-progress", "--out", tmp_path / "report", timeout=900,
                        cwd=tmp_path)
        took = time.monotonic() - t0
    assert hog.proc.poll() is not None  # ended with the block
    assert out.returncode == 0, out.stderr[-3000:]
    kept, runs = _stored(db)
    pre = kept["precheck"]
    assert pre["sample"]["busy"], pre  # a whole core burnt: never a quiet machine
    assert hog.proc.pid in [p["pid"] for p in pre["sample"]["top"]], pre["sample"]
    assert "the machine is busy" in out.stderr
    spent = sum(r["wall_s"] or 0.0 for r in runs)
    stop = kept.get("stop")
    if stop is not None:  # stopped: at once, with the reason and the advice, everywhere
        assert stop["elapsed_s"] <= DECIDED_WITHIN_S, stop
        assert spent < 3000 / 10, spent
        text = stop["text"]
        assert text.startswith("Stopped") and "What would help" in text, text
        assert "quiet" in text and ("margin" in text or "quiet_wait" in text), text
        assert " ".join(text.split()) in " ".join(out.stderr.split())
        html = (tmp_path / "report" / "report.html").read_text()
        assert "Stopped" in html and "What would help" in html
        if extra:  # waited at most quiet_wait, then stopped before its first run
            assert pre["action"] == "stop" and stop["blocks"] == 0
            assert 8 <= pre["waited_s"] <= 8 + 10, pre
            assert all(r["status"] == "planned" for r in runs)
    else:  # waited for a quiet machine (or the noise allowed it) and decided every point
        assert pre["action"] in ("waited", "start"), pre
        assert _decided_everything(db), out.stderr[-3000:]
        assert spent < 3000, spent
    assert took < 900
    print(json.dumps({"took_s": round(took, 1), "stop": stop, "precheck": pre}, indent=1))
