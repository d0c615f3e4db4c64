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


def _imported(module: str, path: Path, reads: bool = False) -> list[tuple[str, str | None, int]]:
    """What ``module`` imports from gpuopt, at module level or inside functions (TYPE_CHECKING blocks aside): one
    ``(module, name, line)`` per imported thing, ``name`` None for a module itself ("import X.Y", "from X import Y"
    where X.Y is a module) and the name otherwise ("from X import name"). With ``reads``, a name read through an
    imported gpuopt module (``gpuopt.registry._REGISTRY``, ``auto._fits``) counts as an import of that name."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    compiled = _compiled_modules()
    found: list[tuple[str, str | None, int]] = []
    aliases: dict[str, str] = {}  # local name -> the gpuopt module it is bound to

    def target(name: str, what: str | None, line: int) -> None:
        if name in compiled or not name.startswith("gpuopt"):
            return
        assert name in MODULES, f"{module} imports {name}, which is not a module of gpuopt/"
        found.append((name, what, line))

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                target(alias.name, None, node.lineno)
                if alias.name.startswith("gpuopt"):
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.asname and alias.name or "gpuopt"
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
                if sub in MODULES or sub in compiled:
                    target(sub, None, node.lineno)
                    aliases[alias.asname or alias.name] = sub
                else:
                    target(source, alias.name, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    tree = ast.parse(path.read_text(), str(path))
    visit(tree)
    for node in ast.walk(tree) if reads else ():  # a module's name read through the module: "gpuopt.registry._REGISTRY"
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "ctx", None), ast.Store):
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in aliases:
                dotted = ".".join([aliases[inner.id], *reversed(chain)])
                owner, _, name = dotted.rpartition(".")
                if owner in MODULES and dotted not in MODULES and dotted not in compiled:
                    found.append((owner, name, node.lineno))
    return found


def _imports(module: str, path: Path) -> set[str]:
    """The gpuopt modules ``module`` imports, at module level or inside functions (TYPE_CHECKING blocks aside)."""
    return {m for m, _, _ in _imported(module, path)} - {module}


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


# ----------------------------------------------------------------------------------------- who imports what

STUDIES = "gpuopt.bench.studies"
#: The bench kit: the modules of gpuopt/bench/ the studies build on (the command line aside).
KIT = {m for m in MODULES
       if m.startswith("gpuopt.bench.") and not m.startswith(STUDIES) and m != "gpuopt.bench.__main__"}

#: Underscore names imported from a module of another package, each with why it cannot be public yet.
PRIVATE_ACROSS_PACKAGES = {
    # gpuopt/_validate.py's array helpers are the infrastructure's argument checks, shared by the layer ops and the
    # networks; giving them public names means editing gpuopt/nn/api.py, which the Op-object refactor rewrites.
    ("gpuopt.nn.api", "gpuopt._validate", "_as_array"),
    ("gpuopt.nn.conv_pool", "gpuopt._validate", "_as_array"),
    ("gpuopt.nn.conv_pool", "gpuopt._validate", "_check_shape"),
    ("gpuopt.nn.conv_pool", "gpuopt._validate", "_device_array"),
    ("gpuopt.models.network", "gpuopt._validate", "_as_array"),
    ("gpuopt.models.network", "gpuopt._validate", "_convert_hint"),
}


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _public_names(module: str) -> set[str] | None:
    """``module``'s ``__all__`` as written in its source (None without one)."""
    for node in ast.parse(MODULES[module].read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return None


def test_no_study_imports_another_study():
    """What studies share lives in the bench kit (gpuopt/bench/*.py); only the registry (studies/__init__.py)
    names the study modules."""
    studies = {m: p for m, p in MODULES.items() if m.startswith(STUDIES + ".")}
    assert len(studies) >= 10
    offenders = [f"{m}:{line} imports {target}" for m, p in studies.items() for target, _, line in _imported(m, p)
                 if target.startswith(STUDIES) and target != m]
    assert not offenders, offenders


def test_private_names_stay_in_their_package():
    """An underscore name is used by the modules of its own package only. Underscore modules of gpuopt/ (the
    compiled _core/_cuda, _ext, _exec, _plan, _validate, _runinfo) are the infrastructure layer and may be imported;
    their underscore names may not."""
    seen, offenders = set(), []
    for m, p in MODULES.items():
        for target, name, line in _imported(m, p, reads=True):
            if name and name.startswith("_") and not name.startswith("__") and _package(target) != _package(m):
                if (m, target, name) in PRIVATE_ACROSS_PACKAGES:
                    seen.add((m, target, name))
                else:
                    offenders.append(f"{m}:{line} uses {target}.{name}")
    assert not offenders, offenders
    assert seen == PRIVATE_ACROSS_PACKAGES, f"allowed but no longer used: {PRIVATE_ACROSS_PACKAGES - seen}"


def test_studies_use_the_kit_by_its_public_names():
    """Every name a study takes from the kit is in that kit module's __all__; every public function and class of
    the kit is listed there and has a docstring."""
    offenders = []
    for m, p in MODULES.items():
        if m.startswith(STUDIES):
            offenders += [f"{m}:{line} takes {name} from {target}, not in its __all__"
                          for target, name, line in _imported(m, p, reads=True)
                          if target in KIT and name is not None and name not in (_public_names(target) or ())]
    for m in sorted(KIT):
        public = _public_names(m)
        assert public is not None, f"{m} has no __all__"
        for node in ast.parse(MODULES[m].read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                if node.name not in public:
                    offenders.append(f"{m}.{node.name} is public but not in __all__")
                if not ast.get_docstring(node):
                    offenders.append(f"{m}.{node.name} has no docstring")
    assert not offenders, offenders


def test_the_private_name_reader_sees_reads_through_a_module(tmp_path):
    """A private name read through an imported module (``auto._fits(...)``) is found, as "from X import _y" is."""
    path = _plant(tmp_path, "from gpuopt.kmeans import auto\n\ndef f():\n    return auto._fits('device', 1, 2, 3)\n")
    assert ("gpuopt.kmeans.auto", "_fits", 4) in _imported("gpuopt.bench.studies.kmeans_map", path, reads=True)
    path = _plant(tmp_path, "def f():\n    from ...kmeans.auto import _fits\n")
    assert ("gpuopt.kmeans.auto", "_fits", 2) in _imported("gpuopt.bench.studies.kmeans_map", path)


def test_op_family_commands_do_not_import_the_bench():
    """``python -m gpuopt.kmeans`` and ``python -m gpuopt.models`` sit below the benchmarks: nothing they import,
    directly or through other modules, is in gpuopt.bench (their run metadata comes from gpuopt._runinfo)."""
    commands = sorted(m for m in MODULES if m.endswith(".__main__") and m.count(".") == 2
                      and not m.startswith("gpuopt.bench"))
    assert {"gpuopt.kmeans.__main__", "gpuopt.models.__main__"} <= set(commands)
    for command in commands:
        reached, todo = set(), [command]
        while todo:
            m = todo.pop()
            for dep in _imports(m, MODULES[m]) - reached:
                reached.add(dep)
                todo.append(dep)
        bench = sorted(m for m in reached if m == "gpuopt.bench" or m.startswith("gpuopt.bench."))
        assert not bench, f"{command} imports {bench}"


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
