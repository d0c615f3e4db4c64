"""The layout of csrc/, read from the sources (no build, no GPU): device primitives that several op families use
live in csrc/common/, and one family reaches another only through that family's public headers.

csrc/common/ belongs to no operation (error handling, launches, cp.async, the TF32 split, wgmma, kernel info...).
Each op family (conv, kmeans, matmul, nn, sparse) keeps its internals to itself: another family, or the bindings,
may include only the headers named in PUBLIC below, and may name ``matmul::X`` only where X is declared in one
of matmul's public headers. So a change inside one family's private headers cannot reach into another's kernels,
and a primitive two families need has to move to common/ rather than be borrowed from the first family's internals.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

CSRC = REPO / "csrc"
COMMON = "common"
BINDINGS = "bindings"

#: Each family's public headers: what another family or the bindings may include.
#: <op>.hpp holds the CPU reference and <op>_cuda.hpp the GPU launchers: the contract the bindings bind, which a
#: family that composes another op (nn's fully_connected runs matmul's launchers, conv's unroll variant runs a
#: matmul per image, the fused conv2d_pool bindings reach nn's conv2d_pool.hpp) calls like any other caller.
#: matmul_warptile.cuh is matmul's one public device header, on purpose: conv2d's implicit_gemm_fast is the
#: warp-tiled matmul kernel with convolution tile loaders, so it shares the tiling types (which name its kernel
#: instantiations) rather than a copy of them; that header includes nothing of matmul's internals (checked below).
#: tf32x3_wgmma.cuh likewise: the 3xTF32 warpgroup-MMA product, which conv2d's pointwise_tf32x3 runs with a
#: gathered B and an NCHW store (its operand and store types are template parameters, not copies of the kernel).
#: <op>_choices.hpp is a family's parameter tables (plain C++): the launchers' enums are declared there, and _core
#: exports the tables to Python, so they are part of the contract too.
PUBLIC = {
    "conv": {"conv2d.hpp", "conv2d_cuda.hpp", "conv2d_choices.hpp"},
    "kmeans": {"kmeans.hpp", "kmeans_cuda.hpp", "kmeans_choices.hpp"},
    "matmul": {"matmul.hpp", "matmul_cuda.hpp", "matmul_warptile.cuh", "matmul_choices.hpp", "tf32x3_wgmma.cuh"},
    "nn": {"nn.hpp", "nn_cuda.hpp", "conv2d_pool.hpp", "conv2d_pool_choices.hpp"},
    "sparse": {"sparse_conv.hpp", "sparse_conv_cuda.hpp", "sparse_choices.hpp"},
}

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_SOURCE_SUFFIXES = {".cu", ".cuh", ".cpp", ".hpp", ".h"}


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in _SOURCE_SUFFIXES)


def _families(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir()} - {COMMON, BINDINGS}


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)  # string literals (an asm template, a message)
    return re.sub(r"//[^\n]*", " ", text)


def include_violations(root: Path) -> list[str]:
    """Every #include that crosses from one part of csrc/ into another's private header."""
    families = _families(root)
    assert families, f"no op family under {root}"
    bad = []
    for path in _sources(root):
        part = path.relative_to(root).parts[0]
        public_self = part in PUBLIC and path.name in PUBLIC[part]
        for target in _INCLUDE.findall(path.read_text()):
            resolved = (path.parent / target).resolve()
            try:
                rel = resolved.relative_to(root.resolve())
            except ValueError:
                continue  # outside csrc/ (none today)
            other, name = rel.parts[0], rel.name
            where = f"{path.relative_to(root)} includes {rel}"
            if part == COMMON and other != COMMON:
                bad.append(f"{where}: csrc/common/ belongs to no operation and includes no family's header")
            elif other in (COMMON, part):
                # A public header includes only common/ and its family's other public headers: otherwise what
                # it exports would drag the family's internals into every includer.
                if public_self and other == part and name not in PUBLIC[part]:
                    bad.append(f"{where}: a public header of {part} includes one of its private headers")
            elif other in families and name not in PUBLIC.get(other, set()):
                bad.append(f"{where}: only {sorted(PUBLIC.get(other, set()))} of {other} are public")
            elif other == BINDINGS:
                bad.append(f"{where}: the bindings sit above every family")
    return bad


def _declared(text: str) -> set[str]:
    """Names a header declares at any level: types, aliases, namespaces, functions and variables."""
    text = _strip_comments(text)
    names = set(re.findall(r"\b(?:struct|class|enum(?:\s+class)?|union)\s+(\w+)", text))
    for qualified in re.findall(r"\bnamespace\s+([\w:]+)", text):  # `namespace a::b::c {`: each of them
        names |= set(qualified.split("::"))
    names |= set(re.findall(r"\busing\s+(\w+)\s*=", text))
    names |= set(re.findall(r"[\w>&*]\s+[&*]*(\w+)\s*\(", text))  # `void f(`, `T g(`, `inline X& h(`
    names |= set(re.findall(r"\bconstexpr\s+[\w:<>, ]+?\s+(\w+)\s*[={]", text))  # `= ...` or `{...}`
    return names - {"return", "if", "for", "while", "switch", "sizeof"}


def matmul_name_violations(root: Path) -> list[str]:
    """``matmul::X`` named outside csrc/matmul/ (and the matmul bindings) where X is not public."""
    public = set()
    for name in PUBLIC["matmul"]:
        public |= _declared((root / "matmul" / name).read_text())
    bad = []
    for path in _sources(root):
        rel = path.relative_to(root)
        if rel.parts[0] == "matmul" or (rel.parts[0] == BINDINGS and "matmul" in path.name):
            continue
        for lineno, line in enumerate(_strip_comments(path.read_text()).splitlines(), 1):
            for name in re.findall(r"\bmatmul::(\w+)", line):
                if name not in public:
                    bad.append(f"{rel}:{lineno}: matmul::{name} is not declared in matmul's public headers")
    return bad


def test_families_include_only_common_and_public_headers():
    assert _families(CSRC) == set(PUBLIC), "a new op family under csrc/: name its public headers in PUBLIC"
    for family, names in PUBLIC.items():
        for name in names:
            assert (CSRC / family / name).is_file(), f"PUBLIC names csrc/{family}/{name}, which does not exist"
    bad = include_violations(CSRC)
    assert not bad, "\n".join(bad)


def test_matmul_internals_are_not_named_outside_matmul():
    bad = matmul_name_violations(CSRC)
    assert not bad, "\n".join(bad)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "csrc"
    for family in [*PUBLIC, COMMON, BINDINGS]:
        (root / family).mkdir(parents=True, exist_ok=True)
    for family, names in PUBLIC.items():
        for name in names:
            (root / family / name).write_text("#pragma once\nnamespace gpuopt::%s { void run(); }\n" % family)
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize("files, expect", [
    ({"conv/x.cu": '#include "../matmul/matmul_kernels.cuh"\n'}, "only"),
    ({"nn/x.cu": '#include "../conv/winograd_tc.cuh"\n'}, "only"),
    ({"common/x.cuh": '#include "../matmul/matmul_cuda.hpp"\n'}, "belongs to no operation"),
    ({"matmul/matmul_warptile.cuh": '#include "matmul_kernels.cuh"\n'}, "its private headers"),
])
def test_the_include_rule_can_fail(tmp_path, files, expect):
    bad = include_violations(_plant(tmp_path, files))
    assert bad and expect in bad[0], bad


def test_the_include_rule_passes_public_and_common(tmp_path):
    root = _plant(tmp_path, {"conv/x.cu": '#include "../matmul/matmul_cuda.hpp"\n#include "../common/tf32.cuh"\n'
                                          '#include "x.cuh"\n#include <string>\n'})
    assert include_violations(root) == []


def test_the_name_rule_can_fail(tmp_path):
    root = _plant(tmp_path, {"kmeans/x.cu": "void f() { matmul::dev::cp_async_commit(); matmul::run(); }\n",
                             "bindings/cuda_matmul.cpp": "void g() { matmul::dev::x(); }\n"})
    assert matmul_name_violations(root) == ["kmeans/x.cu:1: matmul::dev is not declared in matmul's public headers"]


# ---------------------------------------------------------------- the caller's stream
# Every launch, async copy, memset and event of the kernels goes on the current stream (common/stream.hpp): a
# launch without a stream, a synchronous cudaMemcpy/cudaMemset or an explicit legacy stream (nullptr) would run
# outside the caller's stream, unordered with its work and missed by a graph capture.
_STREAM_EXEMPT = {"common/runtime.cu", "common/memory_pool.cu"}  # (the stream services themselves)


def _launch_configs(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"<<<(.*?)>>>", text, re.S)]


def _top_level_args(config: str) -> int:
    depth, n = 0, 1
    for ch in config:
        depth += ch in "([{"
        depth -= ch in ")]}"
        n += ch == "," and depth == 0
    return n


def stream_violations(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".cu", ".cuh", ".cpp", ".hpp") or path.relative_to(root).as_posix() in _STREAM_EXEMPT:
            continue
        text = path.read_text()
        rel = path.relative_to(root).as_posix()
        bad += [f"{rel}: <<<{c}>>> has no stream" for c in _launch_configs(text) if _top_level_args(c) < 4]
        bad += [f"{rel}: {m.group(0)}" for m in re.finditer(r"\bcudaMem(cpy|set)\(", text)]
        bad += [f"{rel}: {m.group(0)}" for m in re.finditer(r"cuda(MemsetAsync|MemcpyAsync|EventRecord|LaunchKernel|"
                                                            r"LaunchCooperativeKernel|MemcpyToSymbolAsync)\([^;]*"
                                                            r"nullptr\)\)", text)]
        for m in re.finditer(r"\bcudaMemsetAsync\(", text):  # (a memset's stream is its 4th argument)
            depth, end = 1, m.end()
            while depth and end < len(text):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            if _top_level_args(text[m.end():end - 1]) < 4:
                bad.append(f"{rel}: {text[m.start():end]} has no stream")
    return bad


def test_every_launch_and_copy_goes_on_the_current_stream():
    assert stream_violations(CSRC) == []


@pytest.mark.parametrize("line", ["kernel<<<grid, block>>>(x);", "k<<<g, b, smem>>>(x);", "cudaMemcpy(d, s, n, k);",
                                  "cudaMemsetAsync(p, 0, n, nullptr));", "cudaMemsetAsync(p, 0, n);",
                                  "cudaEventRecord(ev, nullptr));"])
def test_the_stream_rule_can_fail(tmp_path, line):
    (tmp_path / "a.cu").write_text(line + "\n")
    assert len(stream_violations(tmp_path)) == 1
