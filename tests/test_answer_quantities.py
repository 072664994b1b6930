"""One answer per quantity, the same numbers in every format, for real: a user's `command`
benchmark printing three figures of merit (a loop's time, its rate — the time's reciprocal
times the step count — and an unrelated write time) run under mpiexec natively and in
Charliecloud. The rate and its time are detected as one quantity and answered once (for the
benchmark's `primary` metric); the write time gets its own answer; wall_time none. The
numbers the terminal, the HTML and the Markdown print are those of the JSON."""

import html
import json
import re
import sqlite3

import pytest

from conftest import nearmetal

pytestmark = pytest.mark.integration

STEPS = 4000
# A tiny program: a busy loop timed in ns by the shell, a small file written; awk prints the
# figures with 9 significant digits (a rate and its time multiply to STEPS run by run).
PROGRAM = (f's=$(date +%s%N); i=0; while [ $i -lt {STEPS} ]; do i=$((i+1)); done; e=$(date +%s%N); '
           'head -c 300000 /dev/zero > blob; f=$(date +%s%N); '
           f'awk -v t=$((e-s)) -v w=$((f-e)) \'BEGIN {{ printf "loop_time %.9g s\\nsteps_per_s %.9g\\n'
           f'io_time %.9g s\\n", t / 1e9, {STEPS} / (t / 1e9), w / 1e9 }}\'')

STUDY = '''
[study]
name = "three"
repetitions = 4
seed = 5
timeout = 120
[baseline]
mode = "native"
[matrix]
mode = ["native", "bind"]
runtime = ["charliecloud"]
mpi = ["openmpi"]
ranks = [1]
[[benchmark]]
name = "md"
command = ["/bin/sh", "-c", %s]
primary = "steps_per_s"
[[benchmark.fom]]
name = "steps_per_s"
regex = '^steps_per_s ([0-9.eE+-]+)'
unit = "steps/s"
[[benchmark.fom]]
name = "loop_time"
regex = '^loop_time ([0-9.eE+-]+) s'
unit = "s"
[[benchmark.fom]]
name = "io_time"
regex = '^io_time ([0-9.eE+-]+) s'
unit = "s"
'''


def _pcts(text):
    """The signed percentages of a phrase, each with half a unit of its own last printed digit
    ('−4.4% to +15%' -> [(-4.4, 0.05), (15.0, 0.5)]; an interval's low end carries no sign of its own:
    '−23% [−32 to −13%]' -> -23, -32, -13): numbers are said to 2 significant digits."""
    return [(float(x.replace("−", "-")), 0.5 * 10 ** -len(d) + 1e-9)
            for x, d in re.findall(r"([+−-]\d+(?:\.(\d+))?)(?=%| to [+−-])", text)]


def test_three_figures_of_merit_two_answers_the_same_numbers_everywhere(tmp_path, default_image):
    study = tmp_path / "three.toml"
    study.write_text(STUDY % json.dumps(PROGRAM))
    db, out_dir = tmp_path / "three.db", tmp_path / "report"
    run = nearmetal("study", study, "--db", db, "--out", out_dir, "--no-progress", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    with sqlite3.connect(db) as c:
        assert {s for (s,) in c.execute("SELECT status FROM runs WHERE warmup = 0")} == {"ok"}
        products = [a * b for a, b in c.execute(
            "SELECT x.value, y.value FROM records x JOIN records y ON x.run_id = y.run_id "
            "WHERE x.metric = 'loop_time' AND y.metric = 'steps_per_s'")]
    assert len(products) >= 8 and all(abs(p / STEPS - 1) < 1e-6 for p in products)  # reciprocals run by run
    rep = nearmetal("report", "--db", db, "--format", "json", "--out", tmp_path, timeout=300)
    assert rep.returncode == 0, rep.stderr
    rep_md = nearmetal("report", "--db", db, "--format", "md", "--out", tmp_path, timeout=300)
    assert rep_md.returncode == 0, rep_md.stderr
    data = json.loads((tmp_path / "analysis.json").read_text())
    a = data["answers"]

    # one answer per quantity: the rate with its time folded in (the benchmark's primary), the write time
    got = {e["metric"]: e for e in a["by_benchmark"] if e["variant"] == "bind/charliecloud/openmpi/default"}
    assert sorted(got) == ["io_time", "steps_per_s"], sorted(got)
    assert got["steps_per_s"]["primary"] and got["steps_per_s"]["also"] == ["loop_time"]
    assert not got["io_time"]["primary"] and got["io_time"]["also"] == []
    assert {(n["metric"], n["why"].split(",")[0]) for n in a["not_answered"]} == {
        ("loop_time", "the reciprocal of steps_per_s"), ("wall_time", "launch to exit")}
    assert data["metric_plan"]["md"]["primary"] == "steps_per_s"  # decided at plan time, stored with the study
    (v,) = a["by_variant"]
    assert v["n_points"] == 1 and v["cost_ratio"] == pytest.approx(got["steps_per_s"]["cost_ratio"])
    assert v["name"] == "Bind mode on Charliecloud (Open MPI)"
    # one interval level, the points' own, named as such
    assert a["level_words"] == "90% interval (one look)" and v["level_words"] == a["level_words"]

    # an equivalent primary quantity of a variant equivalent throughout is said by the variant's
    # sentence ('no measurable cost — equivalent within ±x%', answer_text.sentence), with its resolution
    said_by_sentence = {m for m, e in got.items() if e["primary"] and "no measurable cost — equivalent" in v["sentence"]}
    for m in said_by_sentence:
        assert re.search(r"within (±\d+(?:\.\d+)?%)", got[m]["text"]).group(1) in v["sentence"], (got[m], v)
    shown = [e for m, e in got.items() if m not in said_by_sentence]
    terminal = " ".join(run.stdout.split())
    page = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", (out_dir / "report.html").read_text())).split())
    md = " ".join((tmp_path / "report.md").read_text().replace("\\", "").split())
    for fmt, text in (("terminal", terminal), ("html", page), ("markdown", md)):
        # the variant's sentence and each answer's phrase, verbatim
        assert " ".join(v["sentence"].split()) in text, (fmt, v["sentence"])
        for e in shown:
            assert " ".join(e["text"].split()) in text, (fmt, e["text"])
        assert "md wall_time (launch to exit, start-up included: answered when the benchmark's metrics = [...] " \
               "names it)" in text, fmt  # what is not answered, and how to ask for it
        # the numbers in the phrase are the JSON's, at the printed precision
        for e in shown:
            at = text.index(" ".join(e["text"].split()))
            phrase = text[at:at + len(e["text"]) + 1]
            if "×" in phrase:  # a cost of 2x or more is said as factors
                factors = [float(x) for x in re.findall(r"×(\d+(?:\.\d+)?)", phrase)]
                want = [e["cost_ratio"], e["ci_low"], e["ci_high"]] if "[" in phrase else [e["ci_low"], e["ci_high"]]
                assert all(abs(x / w - 1) < 5e-3 for x, w in zip(factors, want)) and len(factors) >= 2, (fmt, phrase)
                continue
            nums = _pcts(phrase)
            want = [e["overhead_pct"], *e["overhead_ci"]] if e["verdict"] != "inconclusive" else list(e["overhead_ci"])
            if e["verdict"] == "equivalent" and not (e["ci_low"] > 1 or e["ci_high"] < 1):
                continue  # 'no measurable cost, within ±x%': the resolution, checked below
            assert len(nums) >= len(want) and all(abs(x - w) <= tol for (x, tol), w in zip(nums, want)), \
                (fmt, phrase, want)
        # the overall ratio and its interval, to 3 decimals, at the level named
        m = re.search(r"cost ratio (\d+\.\d+) \[(\d+\.\d+)–(\d+\.\d+)\], ([^,]+),", text[text.index(v["name"]):])
        assert m, (fmt, text[:2000])
        assert [float(x) for x in m.groups()[:3]] == [round(v[k], 3) for k in ("cost_ratio", "ci_low", "ci_high")]
        assert m.group(4) == a["level_words"]
    # the noise said is the one noise figure (the baseline's CV), where the phrase says it
    for e in got.values():
        if "noise there is" in e["text"]:
            said = float(re.search(r"noise there is ±(\d+(?:\.\d+)?)%", e["text"]).group(1))
            assert abs(said - e["noise_pct"]) <= 0.5
    for e in got.values():  # the answer's noise is the table's (the baseline's CV), not another measure
        p = next(p for p in data["points"] if p["variant"] == e["variant"] and p["metric"] == e["metric"])
        assert e["noise_pct"] == pytest.approx(p["comparison"]["baseline_noise"]["cv"] * 100)
        assert f"±{e['noise_pct']:.1f}%" in page
