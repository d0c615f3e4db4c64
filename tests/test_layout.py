"""The layout rules of docs/architecture.md, read from the source tree: no import circle in gpuopt/, no oversized
module, every variant's facts written once (one binding rule, paths that exist, kernels' limits read from the
compiled modules) and every GPU variant findable: kernel, test and figure."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import gpuopt
from conftest import REPO, cuda_build, needs_cuda_build

PACKAGE = REPO / "gpuopt"
MAX_LINES = 800


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _compiled_modules() -> set[str]:
    """The extension modules CMakeLists.txt builds into the package (gpuopt._core, gpuopt._cuda)."""
    names = re.findall(r"pybind11_add_module\((\w+)", (REPO / "CMakeLists.txt").read_text())
    assert names, "CMakeLists.txt builds no extension module?"
    return {f"gpuopt.{n}" for n in names}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, path: Path) -> set[str]:
    """The gpuopt modules ``module`` imports, at module level or inside functions (TYPE_CHECKING blocks aside)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    compiled = _compiled_modules()
    found: set[str] = set()

    def target(name: str) -> None:
        if name in compiled or not name.startswith("gpuopt"):
            return
        assert name in MODULES, f"{module} imports {name}, which is not a module of gpuopt/"
        found.add(name)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                target(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                # "from X import Y" imports module X.Y when there is one, else a name of X (X runs first).
                target(sub if sub in MODULES or sub in compiled else source)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    found.discard(module)
    return found


def test_no_import_circle_in_gpuopt():
    graph = {m: _imports(m, p) for m, p in MODULES.items()}
    # Tarjan's strongly connected components: any component of more than one module is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    assert not circles, f"import circles in gpuopt/: {circles}"


def test_the_cycle_check_can_fail(tmp_path, monkeypatch):
    """A planted circle (a family module importing its package, which imports it) is found."""
    assert "gpuopt.conv" in _imports("gpuopt.conv.auto", _plant(tmp_path, "from . import conv2d\n"))
    assert "gpuopt.conv" in _imports("gpuopt.conv.auto", _plant(tmp_path, "def f():\n    from gpuopt import conv\n"))


def _plant(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "auto.py"
    path.write_text(source)
    return path


def test_no_module_over_800_lines():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


# ----------------------------------------------------------------------------------------- each fact once


def test_binding_names_are_never_built_in_python():
    """One binding rule, applied in one place (registry.register): no getattr on the compiled module with a
    computed name anywhere else in gpuopt/."""
    offenders = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                    and len(node.args) >= 2 and isinstance(node.args[1], (ast.JoinedStr, ast.BinOp))):
                offenders.append(f"{module}:{node.lineno}")
    assert not offenders, f"binding names built outside the registry: {offenders}"


def test_no_repeated_conv_binding_signature():
    """The conv launchers take one Conv2dArgs; the shape's eleven integers are spelled out once (its constructor)."""
    shape_args = re.compile(r"std::int64_t N,\s*std::int64_t C,\s*std::int64_t H,\s*std::int64_t W,\s*"
                            r"std::int64_t K,\s*std::int64_t R,\s*std::int64_t S")
    hits = {p.name: len(shape_args.findall(p.read_text())) for p in (REPO / "csrc" / "bindings").glob("*.cpp")}
    assert sum(hits.values()) == 1, hits
    for path in (REPO / "csrc" / "bindings").glob("cuda_conv*.cpp"):
        launchers = re.findall(r"def_conv2d\(m,\s*[^,]+,\s*\[[^\]]*\]\(([^,)]*)", path.read_text())
        assert launchers, path.name
        for launcher in launchers:
            assert launcher.strip() == "const Conv2dArgs& a", (path.name, launcher)


def test_python_restates_no_kernel_limit():
    """The kernels' limits reach Python from the compiled module (kernel_limits()), not as literals: the int index
    limit, unroll's scratch budget, the naive GEMM's map limit, and (in the ECE408 family) the constant bank."""
    literals = {"2**31 - 1024", "2 ** 31 - 1024", "2147482624", "1 << 30", "1073741824", "65535 * 16", "1048560"}
    offenders = []
    for module, path in MODULES.items():
        if not module.startswith(("gpuopt.conv", "gpuopt.matmul", "gpuopt.kmeans", "gpuopt.sparse", "gpuopt.nn")):
            continue  # the op families are where a kernel's limit would be restated
        banned = literals | ({"65536"} if module == "gpuopt.conv.constmem" else set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Constant, ast.BinOp)) and not isinstance(getattr(node, "value", None), str):
                if ast.unparse(node) in banned:
                    offenders.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert not offenders, offenders


@needs_cuda_build
def test_every_gpu_variant_has_its_launcher_and_nothing_else_is_bound():
    """The compiled module's variant table is the registry's: every GPU variant with a launcher is bound as
    <op>_<variant>, and every bound launcher is a registered variant."""
    cuda = cuda_build()
    bound = {(op, name) for op, names in dict(cuda.variant_bindings).items() for name in names}
    registered = {(op, name) for op, vs in gpuopt.variants().items() for name, v in vs.items() if v.binding}
    assert bound == registered
    for op, name in registered:
        v = gpuopt.variants(op)[name]
        assert v.binding == f"{op}_{name}" and callable(getattr(cuda, v.binding))
    for check in (n for n in dir(cuda.check) if not n.startswith("_")):
        assert check in {v.binding for vs in gpuopt.variants().values() for v in vs.values()}, check


# ----------------------------------------------------------------------------------------- where is it?


def test_every_variant_says_where_it_lives():
    from gpuopt.where import where

    for op in gpuopt.ops():
        for name, w in where(op).items():
            v = gpuopt.variants(op)[name]
            for path in (w.kernel, w.test, *w.figures):
                assert (REPO / path).is_file(), f"{op}/{name}: {path} does not exist"
            assert w.kernel.startswith("csrc/") or w.kernel.startswith("gpuopt/"), w.kernel
            assert w.test.startswith("tests/") and Path(w.test).name.startswith("test_"), w.test
            if v.needs_cuda:
                assert w.figures, f"{op}/{name}: no figure or table shows it"
                assert Path(w.test).name.startswith("test_gpu_"), w.test
                text = (REPO / w.test).read_text()
                assert name in text, f"{w.test} never names {name}"


@pytest.mark.parametrize("op", ["sparse_conv2d", None])
def test_cli_variants_where(op, tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "gpuopt", "variants", "--where", *([op] if op else [])],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    if op:
        block = out.stdout.split("sparse_conv2d/fast")[1].split("sparse_conv2d/")[0]
        assert "kernel   csrc/sparse/sparse_conv.cu  (launcher sparse_conv2d_fast)" in block
        assert "test     tests/sparse/test_gpu_sparse.py" in block
        assert "figures  benchmarks/results/sparse.png" in block
    else:
        assert out.stdout.count("    kernel   ") == sum(len(vs) for vs in gpuopt.variants().values())
