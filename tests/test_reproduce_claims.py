"""The reproduction report's verdicts (gpuopt/reproduce/claims.py and one module per report): every item's verdict
starts with agrees / partly agrees / differs; every claim of a report quotes its seed at the lines it cites; and
every claim's check can both hold and fail -- shown on the committed results and on copies of them where one
variant's times (or one group's rows) are changed, so no check is a constant."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpuopt.bench.results import read_results
from gpuopt.reproduce import ITEMS, find_results
from gpuopt.reproduce.claims import VERDICT_WORDS, Check, Claim, judge, quote_found, seed_text
from gpuopt.reproduce.items import CLAIMS

RESULTS = find_results()
pytestmark = pytest.mark.skipif(RESULTS is None, reason="no committed results")

# Fields a perturbation scales: times (smaller is faster) and rates (larger is faster).
_TIMES = ("median_ms", "kernel_ms", "computation_ms", "us_per_iter", "total_ms", "h2d_ms", "numpy_ms", "device_ms",
          "us_per_call", "over_kernel_us", "over_device_us", "ratio", "report_ms", "resident_kernel_ms", "auto_ms",
          "auto_fast_ms")
_RATES = ("gflops", "speedup_vs_cudnn", "speedup_vs_cudnn_any", "speedup_vs_cpu", "accuracy")
_GROUPS = ("variant", "label", "stage", "report_version", "layer", "conf", "dataset", "op", "caller", "impl",
           "best_variant", "nnz_per_slice", "input_density", "params.tile_width", "params.unroll",
           "params.block_size", "params.loop_order")


def _get(r, field):
    if field.startswith("params."):
        return (r.get("params") or {}).get(field[7:])
    return r.get(field)


def _rows(study: str) -> list[dict]:
    path = Path(RESULTS) / f"{study}.json"
    if not path.is_file():
        pytest.skip(f"no committed {study} results")
    return read_results(path)[1]


def _scaled(rows, field, value, factor, every=False):
    out = copy.deepcopy(rows)
    for r in out:
        if every or _get(r, field) == value:
            for k in _TIMES:
                if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool):
                    r[k] = r[k] * factor
            for k in _RATES:
                if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool):
                    r[k] = r[k] / factor
    return out


def _perturbations(rows):
    """Copies of ``rows`` with every row, then one group (rows sharing a field's value), made 100x faster or
    slower (gpuopt's own times: its baselines' fields are not scaled), or the group dropped."""
    for factor in (0.01, 100.0):
        yield _scaled(rows, None, None, factor, every=True)
    for field in _GROUPS:
        for value in sorted({str(_get(r, field)) for r in rows if _get(r, field) is not None}):
            raw = next(_get(r, field) for r in rows if str(_get(r, field)) == value)
            for factor in (0.01, 100.0):
                yield _scaled(rows, field, raw, factor)
            yield [r for r in rows if _get(r, field) != raw]


def _all_claims():
    return [(name, study, i, c) for name, study, claims in CLAIMS for i, c in enumerate(claims)]


def test_every_item_has_a_verdict_word():
    from gpuopt.reproduce import _findings

    for item, finding, _ in _findings(ITEMS, Path(RESULTS)):
        assert finding.verdict.startswith(VERDICT_WORDS), (item.title, finding.verdict)
        assert finding.claimed and item.claims, item.title


def test_claims_quote_a_seed_at_its_lines_or_are_gpuopts_own():
    """A report's claim quotes its seed with the lines; one without a quote is gpuopt's goal, and says so."""
    for name, _, _, c in _all_claims():
        if name.startswith("gpuopt"):
            assert c.seed is None, (name, c.says)
        if c.quote or c.seed:
            assert c.seed and c.quote and c.lines, (name, c.says)
            a, b = c.lines
            assert 1 <= a <= b, (name, c.says, c.lines)
        else:
            assert c.cite == "gpuopt's goal", (name, c.says)
    reports = {n.split()[0] for n, _, _, c in _all_claims() if c.seed}
    assert reports == {"ece408-fashion", "cs6235", "ece408-mnist", "cmu18645", "nctu"}


def test_quotes_are_in_the_seed_at_their_lines():
    if seed_text("cs6235-cnn-gpu-conv-report.txt") is None:
        pytest.skip("the reports' seed files are not beside this checkout")
    for name, _, _, c in _all_claims():
        if c.seed is not None:
            assert quote_found(c), (name, c.says, c.cite, c.quote)


@pytest.mark.parametrize("name,study,index", [(n, s, i) for n, s, i, _ in _all_claims()])
def test_each_check_can_hold_and_fail(name, study, index):
    claim = dict((i, c) for n, s, i, c in _all_claims() if n == name)[index]
    rows = _rows(study)
    got = claim.check(rows)
    assert got is not None, f"{name}: '{claim.says}' cannot be checked on the committed {study} results"
    outcomes = {got.holds}
    for variant in _perturbations(rows):
        other = claim.check(variant)
        if other is not None:
            outcomes.add(other.holds)
        if len(outcomes) == 2:
            break
    assert outcomes == {True, False}, f"{name}: '{claim.says}' always {got.holds} on these perturbations"


def test_judge_words():
    yes = Claim("a", lambda rows: Check(True, "x"))
    no = Claim("b", lambda rows: Check(False, "y"))
    blind = Claim("c", lambda rows: None)
    assert judge((yes, blind), []).verdict.startswith("agrees: a: holds (x)")
    assert judge((yes, no), [], "why").verdict.startswith("partly agrees (1 of 2 claims hold)")
    assert judge((yes, no), [], "why").verdict.endswith("-- why")
    assert judge((no,), []).verdict.startswith("differs: b: does not hold (y)")
    assert judge((blind,), []).verdict.startswith("differs: none of its claims can be checked")


def test_overview_tables_in_both_outputs(tmp_path):
    """The Markdown and the HTML page open with the two overview tables: one row per item, its verdict word."""
    import shutil

    from gpuopt.reproduce import studies_for, write_report

    for study in studies_for(ITEMS):
        for suffix in (".json", ".csv"):
            if (Path(RESULTS) / f"{study}{suffix}").is_file():
                shutil.copyfile(Path(RESULTS) / f"{study}{suffix}", tmp_path / f"{study}{suffix}")
    md_path, html_path = write_report(ITEMS, tmp_path, measured_here=False)
    md, page = md_path.read_text(encoding="utf-8"), html_path.read_text(encoding="utf-8")
    for text in (md, page):
        first = text.index("The reports")
        assert first < text.index("Beyond the reports") < text.index("ECE408 Spring 2018")
    rows = [line for line in md.split("## ECE408 Spring 2018")[0].splitlines() if line.startswith("| ")
            and not line.startswith(("| report |", "| --- |"))]
    assert len(rows) == len(ITEMS)
    assert all(row.rstrip(" |").rsplit("| ", 1)[-1].startswith(VERDICT_WORDS) for row in rows), rows
