"""python -m gpuopt reproduce: the items, the redraw from the committed results, the report, the resume rule."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuopt.bench.studies import STUDIES
from gpuopt.reproduce import ITEMS, REPORT_TITLES, studies_for, write_report
from gpuopt.reproduce import _done_here, _findings

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def test_every_report_has_items_and_every_item_shows_files_its_study_writes():
    assert {i.report for i in ITEMS} == set(REPORT_TITLES)
    assert sum(i.report == "cs6235" for i in ITEMS) == 8  # Figures 1-8, one item each
    for item in ITEMS:
        if item.study is None:
            assert item.files == ()  # not built yet: says so, shows nothing
            continue
        assert set(item.files) <= set(STUDIES[item.study].files()), item


def test_every_item_reads_the_committed_results(tmp_path):
    for s in studies_for(ITEMS):
        for suffix in (".json", ".csv"):
            (tmp_path / f"{s}{suffix}").write_bytes((RESULTS / f"{s}{suffix}").read_bytes())
    for item, finding, meta in _findings(ITEMS, tmp_path):
        assert "could not be read" not in finding.measured, (item.title, finding)
        if item.study:
            assert "not in these results" not in finding.measured, (item.title, finding)
            assert meta["gpu"]["name"] == "NVIDIA H200"
        assert finding.verdict


@pytest.mark.slow
def test_redraw_writes_the_report_with_every_item_in_under_two_minutes(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "repro"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gpuopt", "reproduce", "--redraw", "--quiet", "--out", str(out),
                           "--results", str(RESULTS)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert time.perf_counter() - t0 < 120
    md = (out / "reproduction.md").read_text()
    page = (out / "reproduction.html").read_text()
    for item in ITEMS:
        assert f"### {item.title}" in md
    assert md.count("the committed run, redrawn here") == sum(1 for i in ITEMS if i.study)
    assert page.count("Redrawn from the committed H200 results.") == len(ITEMS)
    assert page.count("data:image/png;base64,") >= 15 and "<table>" in page  # figures and tables inside the page
    for png in (f for i in ITEMS for f in i.files if f.endswith(".png")):
        assert f"]({png})" in md and (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_only_and_bad_arguments(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpuopt", "reproduce", "--only", "nope"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "invalid choice: 'nope'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "gpuopt", "reproduce", "--redraw", "--results",
                           str(tmp_path / "none"), "--out", str(tmp_path / "o")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "no committed results" in proc.stderr
    assert not (tmp_path / "o").exists()  # nothing written before the error


def test_installed_package_carries_the_committed_results():
    from gpuopt.reproduce import PACKAGED_RESULTS, find_results

    assert find_results() is not None
    for s in studies_for(ITEMS):  # the installed copy is the committed one
        assert (PACKAGED_RESULTS / f"{s}.json").read_bytes() == (RESULTS / f"{s}.json").read_bytes(), s


def test_a_study_already_measured_at_this_commit_is_not_run_again(tmp_path):
    meta = {"commit": "abc1234", "plan": {"mode": "gpu", "quick": False}}
    (tmp_path / "kmeans.json").write_text(json.dumps({"meta": meta, "rows": []}))
    assert _done_here(tmp_path, "kmeans", "abc1234", quick=False)
    assert not _done_here(tmp_path, "kmeans", "abc1234", quick=True)  # another mode
    assert not _done_here(tmp_path, "kmeans", "fff0000", quick=False)  # another commit
    assert not _done_here(tmp_path, "matmul", "abc1234", quick=False)  # not there
    (tmp_path / "sparse.json").write_text(json.dumps({"meta": {**meta, "plan": {"mode": "cpu"}}, "rows": []}))
    assert not _done_here(tmp_path, "sparse", "abc1234", quick=False)  # CPU results are not the measurement


def test_report_of_an_empty_folder_says_what_is_missing(tmp_path):
    md, page = write_report(ITEMS[:2], tmp_path, measured_here=False, note="test")
    text = md.read_text()
    assert "not in these results" in text and "(ece408_op_time.png: not written)" in text
    assert page.read_text().startswith("<!doctype html>")


@pytest.mark.slow
def test_docs_reproduction_is_the_committed_results_redrawn(tmp_path):
    # After committing new results: python -m gpuopt reproduce --redraw --out DIR --link-prefix ../benchmarks/results/
    # and copy DIR/reproduction.md to docs/reproduction.md.
    pytest.importorskip("matplotlib")
    out = tmp_path / "repro"
    proc = subprocess.run([sys.executable, "-m", "gpuopt", "reproduce", "--redraw", "--quiet", "--out", str(out),
                           "--results", str(RESULTS), "--link-prefix", "../benchmarks/results/"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "reproduction.md").read_text() == (REPO / "docs" / "reproduction.md").read_text()
    for link in (f for i in ITEMS for f in i.files):
        assert (RESULTS / link).is_file(), link  # every link of docs/reproduction.md resolves
