"""The HTML report's first screen, measured in a real browser: a real small study's report
opened in Debian's headless chromium (through chromium-driver and selenium, both installed by
scripts/setup.sh --test) at a 1280x1000 viewport shows the summary and the verdict matrix
within its first 1000 px, each cell coloured by its verdict, the same cells the terminal
printed; a screenshot (first-screen.png) is written beside the report. A rendered analysis
of 30 variants still fits."""

import json
import os
import shutil
import time

import pytest

from conftest import nearmetal
from nearmetal.report import matrix as M

STUDY = """
[study]
name = "firstscreen"
repetitions = 4
warmup = 0
seed = 11
timeout = 120

[baseline]
mode = "native"

[matrix]
mode = ["native", "hybrid", "bind"]
runtime = ["charliecloud"]
mpi = ["mpich"]
image = ["default"]
ranks = [2]
threads = [1]

[[benchmark]]
kernel = "latency"
args = ["-m", "8:64", "-i", "200"]

[[benchmark]]
kernel = "bw"
args = ["-m", "4096:16384"]
"""

VIEWPORT = (1280, 1000)
# the template's cell backgrounds (report.html: --eq-bg, --slow-bg, --fast-bg, --inc-bg)
BACKGROUND = {"equivalent": "rgb(227, 244, 231)", "slower": "rgb(251, 228, 226)", "faster": "rgb(225, 238, 251)",
              "inconclusive": "rgb(253, 241, 214)"}


def _ours(profile):
    """Pids of the processes whose command line names this test's chromium profile."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if str(profile).encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass  # ended meanwhile
    return pids


@pytest.fixture
def browser(tmp_path):
    """Headless chromium driven by chromium-driver, at the viewport, as root (--no-sandbox);
    quit afterwards, and no process of its profile may outlive the test."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "chromium and chromium-driver are missing: run scripts/setup.sh --test"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tmp_path / "chromium-profile"
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars",
                f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        # the window's size includes what a headless window still reserves: set the viewport itself
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                          {"width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False})
        yield d
    finally:
        d.quit()
        deadline = time.monotonic() + 15
        while _ours(profile) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _ours(profile)
        for pid in left:  # only ours, by pid: the test fails below either way
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        assert not left, f"chromium processes outlived the test: {left}"


def test_the_first_screen_shows_the_summary_and_the_matrix(tmp_path, default_image, browser):
    f, db = tmp_path / "firstscreen.toml", tmp_path / "firstscreen.db"
    f.write_text(STUDY)
    out = nearmetal("study", f, "--db", db, "--no-progress", "--out", tmp_path, timeout=500)
    assert out.returncode == 0, out.stderr
    report = tmp_path / "report.html"
    assert report.is_file(), out.stdout
    js = nearmetal("report", "--db", db, "--format", "json", "--out", tmp_path, timeout=120)
    assert js.returncode == 0, js.stderr
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    cells = analysis["answers"]["by_benchmark"]
    assert len(cells) == 4  # hybrid and bind x latency and bandwidth
    sentences = M.build(analysis)["summary"]
    assert 2 <= len(sentences) <= 4, sentences

    browser.get(report.as_uri())
    assert browser.execute_script("return [window.innerWidth, window.innerHeight]") == list(VIEWPORT)
    rect = "const r = document.querySelector(arguments[0]).getBoundingClientRect(); " \
           "return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height};"
    summary, matrix = (browser.execute_script(rect, sel) for sel in ("#first-summary", "#verdict-matrix"))
    for what, r in (("summary", summary), ("matrix", matrix)):
        assert r["height"] > 0 and 0 <= r["top"] and r["bottom"] <= VIEWPORT[1], (what, r)
        assert 0 <= r["left"] and r["right"] <= VIEWPORT[0], (what, r)
    assert summary["bottom"] <= matrix["top"]
    text = browser.execute_script("return document.querySelector('#first-summary').innerText")
    assert text.startswith("2 variants × 2 benchmarks compared with their baseline at a margin of ±3%: ")
    assert text == " ".join(sentences)

    shown = browser.execute_script(
        "return Array.from(document.querySelectorAll('#verdict-matrix td.m:not(.g-na)')).map(td => "
        "({cls: td.className, bg: getComputedStyle(td).backgroundColor, text: td.innerText}))")
    assert len(shown) == len(cells)
    terminal = " ".join(out.stdout.split())
    for c in shown:  # coloured by its verdict, and the same cell the terminal printed
        verdict = next(v for v in BACKGROUND if f"g-{v}" in c["cls"].split())
        assert c["bg"] == BACKGROUND[verdict], c
        mark_ratio, interval = c["text"].replace("⚠", "").split("\n")
        assert f"{mark_ratio.strip()} {interval.strip()}" in terminal, (c, out.stdout)
        assert ("disturbed" in c["cls"].split()) == ("⚠" in c["text"])
    # marked where runs on a busy machine went into the cell, as the analysis counts them
    assert sum("⚠" in c["text"] for c in shown) == sum(1 for e in cells if e["disturbed"])
    ratios = sorted(M.fmt_ratio(e["cost_ratio"]) for e in cells)  # as the matrix rounds: 1.113, 2.61
    assert sorted(c["text"].split("\n")[0].split()[1] for c in shown) == ratios

    png = tmp_path / "first-screen.png"
    assert browser.save_screenshot(str(png))
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) == VIEWPORT


def test_thirty_variants_still_fit_the_first_screen(tmp_path, browser, monkeypatch):
    """Many variants: each cell on one line, and the matrix still ends within 1000 px."""
    from nearmetal.analysis.answers import answers
    from nearmetal.report.html import render_html
    from test_answers import build, latency

    monkeypatch.setenv("NEARMETAL_REPORT_JOBS", "1")  # figures drawn in this process
    variants = [({"name": f"variant number {i:02d}", "mode": "hybrid", "runtime": "charliecloud", "mpi": "openmpi",
                  "image": "default"}, 1.0 + 0.01 * i) for i in range(30)]
    data = build([latency(n=2, name=f"benchmark-{k}") for k in range(6)], variants, reps=6)
    data["answers"] = answers(data, n_boot=200)
    render_html(data, tmp_path / "report.html")
    browser.get((tmp_path / "report.html").as_uri())
    rows = browser.execute_script("return document.querySelectorAll('#verdict-matrix tr').length")
    assert rows == 31 and "compact" in browser.execute_script(
        "return document.querySelector('#verdict-matrix').className")
    bottom = browser.execute_script("return document.querySelector('#verdict-matrix').getBoundingClientRect().bottom")
    assert bottom <= VIEWPORT[1]
    assert browser.save_screenshot(str(tmp_path / "first-screen.png"))
