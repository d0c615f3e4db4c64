"""The study machinery and the collection of studies: variant selection, declared outputs, shown_in, imports."""

from __future__ import annotations

import ast
from pathlib import Path

import gpuopt
from gpuopt import bench
from gpuopt.bench import study
from gpuopt.bench.studies import STUDIES, cs6235, ece408, shown_in
from gpuopt.bench.study import RunSettings


def test_studies_skip_missing_variants(monkeypatch):
    # A variant another engineer has not registered yet is skipped with a note.
    notes: list[str] = []
    plan = RunSettings(gpu=True, tiny=True)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    chosen = study.select_variants("conv2d", ("no_such_variant", "cpu"), plan, notes)
    assert chosen == ["cpu"]
    assert any("no_such_variant" in n and "not registered" in n for n in notes)


# --------------------------------------------------------------------------- outputs, shown_in

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def test_every_gpu_variant_is_shown_and_every_output_is_committed():
    for op in ("matmul", "conv2d", "kmeans", "sparse_conv2d"):
        for name, variant in gpuopt.variants(op).items():
            if variant.needs_cuda:
                assert shown_in(op, name), (op, name)
    for s in STUDIES.values():
        assert s.outputs, s.name
        for o in s.outputs:
            assert (RESULTS / o.file).is_file(), (s.name, o.file)


def test_every_committed_figure_and_table_is_declared():
    declared = [o.file for s in STUDIES.values() for o in s.outputs]
    assert len(declared) == len(set(declared))  # one study writes each file
    committed = {p.name for p in RESULTS.iterdir() if p.suffix in (".png", ".md", ".log")}
    assert committed == set(declared)
    for s in STUDIES.values():
        assert s.files()[:2] == (f"{s.name}.csv", f"{s.name}.json")


def test_shown_in():
    assert shown_in("conv2d", "unroll_c") == ("conv2d.png", "cs6235_fig4.png", "cs6235.md")
    assert shown_in("conv2d", "tiled") == ("conv2d.png", "ece408_op_time.png", "ece408_tile_width.png",
                                           "ece408_op_time.md", "networks.png", "networks.md")  # MNIST 'optimized'
    assert "tune_conv_auto.log" in shown_in("conv2d", "direct_regblock")
    assert shown_in("matmul", "cublas") == ("matmul.png", "matmul_ladder.md", "matmul_report.png", "matmul_report.md")
    assert shown_in("matmul", "naive") == shown_in("matmul", "cublas")
    assert shown_in("kmeans", "cpu") == ("kmeans.png",)
    assert shown_in("sparse_conv2d", "coo") == ("sparse.png", "sparse_report.md")
    assert shown_in("conv2d", "cpu") == ("ece408_op_time.png", "ece408_op_time.md", "networks.png",
                                         "networks.md")  # the report's CPU step; the networks' 'serial'
    assert shown_in("argmax", "streams") == ("networks.png", "networks.md")  # from the stage table
    assert shown_in("fully_connected", "cublas") == ("networks.md",)  # the layer-op table only
    assert shown_in("matmul", "no_such_variant") == () and shown_in("fft", "naive") == ()


def test_figure_declarations_match_what_runs(fake_conv_gpu):
    # The variants each CS6235 / ECE408 figure declares are those its study runs for it on a GPU.
    plan = RunSettings(gpu=True, tiny=True, progress=False)
    entries = cs6235.cs6235_entries(plan, [])
    for f in cs6235.CS6235_FIGURES:
        assert {e.variant for e in entries[f["figure"]]} == set(f["variants"]), f["figure"]
    work, _ = ece408.ece408_work(plan, [])
    shows = {o.file: set(STUDIES["ece408"].shows(o)) for o in STUDIES["ece408"].outputs}
    assert {e.variant for base, _, e in work if base["part"] != "tile_width"} == shows["ece408_op_time.png"]
    assert {e.variant for base, _, e in work if base["part"] == "tile_width"} == shows["ece408_tile_width.png"]


def _imports(path: Path, package: str) -> set[str]:
    """The gpuopt.bench modules ``path`` imports, at any level (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(p for p in (base, node.module) if p) if node.level else (node.module or "")
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("gpuopt.bench")}


def test_no_import_cycles():
    root = Path(bench.__file__).resolve().parent
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = (path, name if parts[-1] == "__init__" else name.rsplit(".", 1)[0])
    graph = {name: {m for m in _imports(path, pkg) if m in modules and m != name}
             for name, (path, pkg) in modules.items()}
    # A package's own __init__ importing its submodules is no cycle; a submodule importing back up is.
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for dep in graph[name]:
            assert state.get(dep) != 1, " -> ".join([*trail, name, dep])
            if dep not in state:
                visit(dep, [*trail, name])
        state[name] = 2

    for name in graph:
        if name not in state:
            visit(name, [])
    assert "gpuopt.bench.studies.cs6235" in graph and "gpuopt.bench.figures" in graph
    assert not any(m.startswith("gpuopt.bench.studies") for m in graph["gpuopt.bench.figures"]
                   | graph["gpuopt.bench.tables"] | graph["gpuopt.bench.study"])
