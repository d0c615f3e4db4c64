"""Parameter choices are written once, in C++ (csrc/*/*_choices.hpp), across the language gap.

The launchers dispatch on constexpr tables; gpuopt._core exports them (every build, CUDA or not); the registry's
Params are built from them. These tests need no GPU: the exported tables, the registry, and the C++ sources read
as text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gpuopt
from gpuopt._ext import kernel_choices

REPO = Path(__file__).resolve().parent.parent
CSRC = REPO / "csrc"


def registered_params():
    """(op/variant/param, Param) of every registered variant."""
    for op in gpuopt.registry.ops():
        for name, variant in gpuopt.variants(op).items():
            for param in variant.params.values():
                yield f"{op}/{name}/{param.name}", param


def test_every_table_is_exported_with_its_default_among_its_values():
    tables = kernel_choices()
    assert "conv2d/implicit_gemm_fast/tile" in tables
    for key, table in tables.items():
        assert key.count("/") == 2, key
        assert table["allowed"] and len(set(table["allowed"])) == len(table["allowed"]), key
        assert table["default"] in table["allowed"], key


def test_params_are_the_kernels_tables():
    """A Param whose op/variant/param has a C++ table is built from it (allowed values, order, default), and
    every table is some registered Param's: none is left for Python to restate."""
    tables = kernel_choices()
    used = set()
    for key, param in registered_params():
        native = getattr(param, "native", "")
        if native:
            used.add(native)
            table = tables[native]
            assert param.allowed == table["allowed"] and param.default == table["default"], key
        if key in tables:  # the parameter has a table: it must be read from it, not written again
            assert native == key, f"{key}: its values are csrc's table; build it with Param.from_kernels"
    # (a build without cuDNN registers no conv2d cudnn: its table is there, its variant is not)
    unused = {key for key in set(tables) - used if key.rsplit("/", 1)[0].split("/")[1] in
              gpuopt.variants(key.split("/")[0])}
    assert not unused, f"tables no registered Param reads: {sorted(unused)}"


def test_defaults_users_get_today():
    """The defaults the public functions ran before the tables moved to C++ (where C++ said otherwise, Python's
    won: unroll_k 8 / rsc, tile_buffer 4)."""
    v = gpuopt.variants
    assert v("conv2d")["unroll_k"].defaults() == {"block_size": 128, "unroll": 8, "loop_order": "rsc"}
    assert v("conv2d")["unroll_c"].defaults() == {"block_size": 128, "unroll": 4}
    assert v("conv2d")["implicit_gemm_fast"].defaults() == {"tile": "64x64x8"}
    assert v("conv2d")["unroll"].defaults() == {"gemm": "async"}
    for name in ("plain", "reorder", "unroll_nk", "shared", "general"):
        assert v("conv2d")[name].defaults() == {"block_size": 128}, name
    for name in ("tiled", "tiled_unrolled", "tiled_corner_turn"):
        assert v("conv2d")[name].defaults() == {"tile_width": 16}, name
    assert v("conv2d")["tiled_channels"].defaults() == {"tile_width": 16, "channels_per_block": 2}
    assert v("conv2d")["implicit_gemm"].defaults() == {"tile": 16}
    assert v("conv2d")["direct_regblock"].defaults() == {"k_tile": "auto", "pixels": "auto"}
    assert v("conv2d")["direct_fused"].defaults() == {"channels_per_block": 0, "images": 0}
    assert v("conv2d")["winograd"].defaults() == {"m": "auto"}
    assert v("conv2d")["auto"].defaults() == {"autotune": False, "algorithms": "precise"}
    assert v("conv2d_pool")["fused"].defaults() == {"channels_per_block": 0, "images": 0, "channels_per_thread": 0}
    assert v("conv2d_pool")["direct_smallc"].defaults() == {"images": 0, "maps": 0}
    assert v("conv2d_pool")["winograd"].defaults() == {"m": "auto", "products": "auto"}
    assert v("matmul")["tile_buffer"].defaults() == {"tile_sz": 4}
    assert v("matmul")["blocktile_2d"].defaults() == {"tile": "64x64x8"}
    assert v("matmul")["vectorized"].defaults() == {"tile": "128x128x8"}
    assert v("matmul")["async"].defaults() == {"tile": "auto", "stages": 3, "split_k": "auto"}
    assert v("matmul")["tf32x3"].defaults() == {"stages": 3, "flush_k": 16, "split": "fragment"}
    kmeans = v("kmeans")
    assert kmeans["cpu"].defaults() == {"summation": "liao"}
    assert kmeans["liao"].defaults() == {"threads": 128}
    for step in ("liao_occupancy", "liao_aos", "liao_vec"):
        assert kmeans[step].defaults() == {"threads": 256, "reduction_threads": 512}, step
    for loop in ("device", "device_gemm"):
        assert kmeans[loop].defaults() == {"loops_per_sync": 8, "blocks": 0}, loop
    assert kmeans["device_fused"].defaults() == {"loops_per_sync": 16, "blocks": 0}
    assert kmeans["device_tiled"].defaults() == {"loops_per_sync": 8, "blocks": 0, "products": "auto"}
    assert kmeans["device_persistent"].defaults() == {"blocks": 0, "x_memory": "auto"}
    assert kmeans["stream"].defaults() == {"chunk_points": 0, "buffers": 3, "host_memory": "register",
                                           "assign": "auto"}
    # 0 stays the number 0 where Python showed it so (not "auto"), and the sets differ where they did.
    for key in ("liao_vec/reduction_threads", "device/blocks", "device_persistent/blocks", "stream/chunk_points"):
        name, param = key.split("/")
        assert kmeans[name].params[param].allowed[0] == 0 and type(kmeans[name].params[param].allowed[0]) is int
    assert set(kmeans["device"].params["loops_per_sync"].allowed) < set(
        kmeans["device_fused"].params["loops_per_sync"].allowed)
    assert set(kmeans["device"].params["blocks"].allowed) < set(kmeans["device_persistent"].params["blocks"].allowed)


#: kmeans Params whose values are numbers or names but that Python alone knows, each with the reason; empty: every
#: such Param of a kmeans variant picks a launcher's number or code path, so its values are csrc's table.
KMEANS_PYTHON_ONLY: dict[str, str] = {}


def test_kmeans_number_and_name_params_are_native():
    """Every Param of a registered kmeans variant whose values are numbers or names (a kernel's block size, grid,
    batching, slab, mode) is built from csrc/kmeans/kmeans_choices.hpp's table (Param.from_kernels), not listed in
    Python; exceptions are named in KMEANS_PYTHON_ONLY with their reason."""
    checked, listed = [], []
    for key, param in registered_params():
        if not key.startswith("kmeans/"):
            continue
        values = (param.default, *param.allowed)
        if not all(isinstance(a, (int, float, str)) and not isinstance(a, bool) for a in values):
            continue
        checked.append(key)
        if key not in KMEANS_PYTHON_ONLY and param.native != key:
            listed.append(key)
    assert len(checked) >= 20, checked  # the scan sees the k-means variants' parameters
    assert not listed, f"kmeans Params listed in Python, not read from csrc's tables: {listed}"
    assert not set(KMEANS_PYTHON_ONLY) - set(checked), "allow-list entries that are no kmeans Param any more"


#: The conv2d and conv2d_pool parameters only Python reads, each with why no C++ table holds it.
PYTHON_ONLY = {
    "conv2d/auto/autotune": "whether auto times every candidate on the first call: Python's loop over the variants",
    "conv2d/auto/algorithms": "auto's precision class ('precise' or 'fast'), read by its Python heuristic, which "
                              "hands the same class to cuDNN's table (conv2d/cudnn/algorithms) where it runs cudnn",
}


@pytest.mark.parametrize("op", ["conv2d", "conv2d_pool"])
def test_conv_params_are_the_kernels_tables(op):
    """Every parameter of a conv2d or conv2d_pool variant (numbers, kernel and tile names) is a C++ table's
    (Param.from_kernels, under its own op/variant/param), except the Python-only ones listed above."""
    python_only = {key for key in PYTHON_ONLY if key.startswith(op + "/")}
    seen, restated = set(), []
    for name, variant in gpuopt.variants(op).items():
        for param in variant.params.values():
            key = f"{op}/{name}/{param.name}"
            seen.add(key)
            if key in python_only:
                assert not param.native, f"{key} reads a C++ table: take it off PYTHON_ONLY"
            elif param.native != key:
                restated.append(key)
    assert not restated, f"parameters written in Python, not read from csrc's *_choices.hpp tables: {restated}"
    assert python_only <= seen, f"PYTHON_ONLY names parameters that are not registered: {python_only - seen}"


# ------------------------------------------------------------------------------------------------ C++ sources

def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _sources(*suffixes: str):
    return sorted(p for p in CSRC.rglob("*") if p.suffix in suffixes)


def test_no_string_parsing_past_the_bindings():
    """String parameters become enums or indices in csrc/bindings (through the tables); nothing below compares a
    string with a literal."""
    hits = []
    for path in _sources(".hpp", ".cpp", ".cu", ".cuh"):
        if path.parent.name == "bindings":
            continue
        for number, line in enumerate(_strip_comments(path.read_text()).splitlines(), 1):
            if re.search(r'[!=]=\s*"', line):
                hits.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not hits, "string comparisons outside csrc/bindings:\n" + "\n".join(hits)


# What counts as a default argument: in a declaration or definition `name(params)` followed by `;` or `{` (string
# literals and comments blanked first), an `=` inside the parameter list that is not part of `==`, `!=`, `<=` or
# `>=`. Control statements (if, for, while, switch) and macro calls are not declarations. Struct member
# initialisers (`int x = 0;`) are outside any parameter list and do not count.
_DECLARATION = re.compile(r"\b([A-Za-z_]\w*)\s*\(((?:[^()]|\([^()]*\))*)\)\s*(?:const\s*)?(?:noexcept\s*)?[;{]")
_DEFAULT = re.compile(r"(?<![=!<>])=(?!=)")
_NOT_DECLARATIONS = {"if", "for", "while", "switch", "return", "sizeof", "decltype", "static_assert"}


def default_arguments(text: str) -> list[str]:
    """Names of the functions declared in C++ `text` with a default argument."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', _strip_comments(text))
    return [m.group(1) for m in _DECLARATION.finditer(text)
            if m.group(1) not in _NOT_DECLARATIONS and not m.group(1).isupper() and _DEFAULT.search(m.group(2))]


def test_the_default_argument_scan_sees_them():
    assert default_arguments('void f(int a, const std::string& t = "64x64x8");') == ["f"]
    assert default_arguments("void g(const float* x,\n       Activation act = Activation::None) {") == ["g"]
    assert default_arguments("KernelInfo h(const Cfg& cfg = {});") == ["h"]
    assert default_arguments("void f(int a, int b);  // b = 0 in a comment\nint n = 4;") == []
    assert default_arguments("if (a == b) { }\nfor (int i = 0; i < n; ++i) {") == []


def test_launchers_take_no_default_arguments():
    """The launcher headers declare every parameter required: the defaults are the tables' (or the registry's),
    and each caller passes everything."""
    found = {str(p.relative_to(REPO)): default_arguments(p.read_text())
             for p in CSRC.glob("*/*.hpp") if p.parent.name != "bindings"}
    found = {path: names for path, names in found.items() if names}
    assert not found, f"default arguments in launcher headers: {found}"


def test_the_fast_conv_tile_list_is_written_once():
    """implicit_gemm_fast's tile list (every one of its names, as quoted strings) is in
    csrc/conv/conv2d_choices.hpp alone: the dispatcher, the registry and the tests read that table. (A file may
    name one tile it picks, as conv2d auto does; not the list.)"""
    names = kernel_choices()["conv2d/implicit_gemm_fast/tile"]["allowed"]
    assert len(names) >= 3, names
    files = set()
    for root in ("csrc", "gpuopt", "tests"):
        for path in (REPO / root).rglob("*"):
            if path.suffix not in (".py", ".hpp", ".cpp", ".cu", ".cuh") or not path.is_file():
                continue
            text = path.read_text()
            if all(re.search(rf"""["']{re.escape(n)}["']""", text) for n in names):
                files.add(str(path.relative_to(REPO)))
    assert files == {"csrc/conv/conv2d_choices.hpp"}, sorted(files)


@pytest.mark.parametrize("header", ["conv/conv2d_choices.hpp", "nn/conv2d_pool_choices.hpp",
                                    "matmul/matmul_choices.hpp", "kmeans/kmeans_choices.hpp",
                                    "sparse/sparse_choices.hpp"])
def test_choices_headers_are_plain_cpp(header):
    """The tables compile without CUDA (gpuopt._core exports them in every build): no CUDA include in them."""
    text = (CSRC / header).read_text()
    includes = re.findall(r'#include\s+[<"]([^>"]+)[>"]', text)
    assert includes and all(not i.endswith((".cuh", ".cu")) and "cuda" not in i for i in includes), includes
