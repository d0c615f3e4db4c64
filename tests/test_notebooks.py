"""Every notebook's code cells run top to bottom (CPU paths here, GPU cells where there is one)."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


REPORT_NOTEBOOKS = {"cmu18645", "cs6235", "ece408_fashion", "ece408_mnist", "nctu_sparse"}


def test_one_notebook_per_report_and_the_quickstart():
    assert {p.stem for p in NOTEBOOKS} == REPORT_NOTEBOOKS | {"quickstart"}


@pytest.mark.parametrize("data", ["here", "absent"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, data, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if data == "absent":  # as in CI and on a user's machine without ../shared/data
        monkeypatch.setenv("GPUOPT_DATA_DIR", str(tmp_path / "no_data_here"))
    monkeypatch.delenv("GPUOPT_RESULTS_DIR", raising=False)  # the installed package's own copy of the results
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    assert cells, "notebook has no code"
    namespace: dict = {"__name__": "__notebook__"}
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        try:
            exec(compile(source, f"{path.name}[cell {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            pytest.fail(f"{path.name} cell {i} failed: {exc!r}\n{source}")
    if path.stem in REPORT_NOTEBOOKS:  # each tells its report's story from the results: the summary printed
        out = capsys.readouterr().out
        assert "verdict:" in out and "not found" not in out, out[-2000:]
        shown = [line for line in out.splitlines() if line.startswith("figure: ")]
        assert shown and all(Path(line[8:]).is_file() for line in shown), out[-2000:]  # every figure is there
