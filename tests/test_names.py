"""Names that mix no axes (docs/glossary.md): variant modules are named by technique, the report a variant
reproduces is its registration's ``report``; no tracker issue numbers in code or docs; every word gpuopt uses
with more than one meaning has its entry in the glossary. Pure Python: reads the source tree and the registry."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from conftest import REPO
from gpuopt.registry import REPORTS, ops, variants

# "issue 13", "Issue 10's", "issue #4", "issues 11 and 12": a tracker the code does not ship with. Not "issue 68%
# busy" or "a warpgroup issues 12 wgmma" (the instruction-issue sense).
ISSUE = re.compile(r"(?i)\bissue\s*#\d+|\bissue\s+\d+\b(?!%)|\bissues\s+#?\d+\s*(?:,|and)\s*#?\d+")
SCANNED = ("gpuopt", "csrc", "docs", "scripts", "tests", "README.md", "benchmarks/README.md")
TEXT = {".py", ".md", ".cu", ".cuh", ".cpp", ".hpp", ".h", ".txt", ".toml", ".cmake", ".ipynb", ".sh", ".cfg"}

FAMILIES = {"conv2d": "gpuopt/conv", "kmeans": "gpuopt/kmeans"}
GLOSSARY = REPO / "docs" / "glossary.md"


def _text_files():
    for entry in SCANNED:
        path = REPO / entry
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in files:
            rel = p.relative_to(REPO).as_posix()
            if p.suffix in TEXT and "__pycache__" not in rel:
                yield rel, p


def test_no_tracker_issue_numbers():
    """Code and docs cite the report, the measurement or the notes/ file, never a tracker's issue number."""
    this = Path(__file__).resolve()
    hits = []
    for rel, path in _text_files():
        if path.resolve() == this:
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if ISSUE.search(line):
                hits.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert not hits, "tracker issue numbers (cite what they meant instead):\n" + "\n".join(hits)


def test_issue_pattern_tells_citations_from_instruction_issue():
    assert ISSUE.search("kept short on purpose (issue 13's per-call cost)")
    assert ISSUE.search("Issue 10: the SM clock") and ISSUE.search("see issue #4") and ISSUE.search("issues 11 and 12")
    assert not ISSUE.search("2 blocks an SM, issue 68% busy") and not ISSUE.search("a warpgroup issues 12 wgmma")


def _report_words() -> set[str]:
    """The report ids and their first parts ("ece408" of "ece408-fashion"): what a module must not be named."""
    return set(REPORTS) | {key.split("-")[0] for key in REPORTS}


def _registrations(path: Path) -> list[tuple[str, str]]:
    """(op, variant) of every ``register("op", "name", ...)`` call in a module (decorator or call)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "register"
                and len(node.args) >= 2 and all(isinstance(a, ast.Constant) for a in node.args[:2])):
            found.append((node.args[0].value, node.args[1].value))
    return found


def _is_alias(path: Path) -> bool:
    """A module kept for an old import path: a docstring and imports, nothing else (so it registers nothing)."""
    body = ast.parse(path.read_text(), str(path)).body
    return all(isinstance(n, (ast.Import, ast.ImportFrom)) or (isinstance(n, ast.Expr) and isinstance(
        n.value, ast.Constant) and isinstance(n.value.value, str)) for n in body)


def _family_modules(folder: str) -> dict[str, Path]:
    return {p.stem: p for p in sorted((REPO / folder).glob("*.py")) if not p.stem.startswith("__")}


def test_no_variant_module_is_named_after_a_report():
    """gpuopt/conv and gpuopt/kmeans modules are named by technique; a report-named module may only be an alias
    of the technique modules, registering nothing."""
    words = _report_words()
    offenders = []
    for folder in FAMILIES.values():
        for stem, path in _family_modules(folder).items():
            named_after = words & set(stem.split("_"))
            if named_after and not (_is_alias(path) and not _registrations(path)):
                offenders.append(f"{folder}/{stem}.py (report {sorted(named_after)})")
    assert not offenders, "modules named after a report (name them by technique; the report is metadata):\n" + \
        "\n".join(offenders)


def test_alias_modules_register_nothing_and_import_only_technique_modules():
    words = _report_words()
    for folder in FAMILIES.values():
        modules = _family_modules(folder)
        for stem, path in modules.items():
            if not _is_alias(path):
                continue
            assert not _registrations(path), path
            package = folder.replace("/", ".")
            mod = importlib.import_module(f"{package}.{stem}")
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ImportFrom):
                    assert node.level == 1 and node.module in modules and not _is_alias(modules[node.module]), \
                        f"{path}: re-export from a technique module of the package, got {node.module!r}"
                    assert not words & set(node.module.split("_")), node.module
            assert mod.__doc__, f"{path}: say what it is an old name of"


def test_every_variant_module_is_a_technique_and_every_report_is_metadata():
    """Each conv2d and kmeans variant is registered in exactly one technique-named module; a variant whose
    description draws on a report names that report in ``report`` (not gpuopt's own or the reference)."""
    words = _report_words()
    where: dict[tuple[str, str], list[str]] = {}
    for folder in FAMILIES.values():
        for stem, path in _family_modules(folder).items():
            for key in _registrations(path):
                where.setdefault(key, []).append(stem)
    for op in FAMILIES:
        for name, v in variants(op).items():
            modules = where.get((op, name), [])
            assert len(modules) == 1, f"{op}/{name} registered in {modules or 'no module'} of {FAMILIES[op]}"
            assert not words & set(modules[0].split("_")), f"{op}/{name}: module {modules[0]} is named after a report"
            assert v.report in REPORTS, (op, name, v.report)
            if re.search(r"\breports?\b|\breport's\b|\bLiao's CUDA port", v.description):
                assert v.report not in ("gpuopt", "reference", "library"), \
                    f"{op}/{name} reproduces a report (its description says so) but its report is {v.report!r}"
    # The modules' report mix is free: a technique module may hold several reports' variants and gpuopt's.
    assert len({v.report for v in variants("conv2d").values()}) > 2


def _public_names() -> dict[str, set[str]]:
    """Every public name by where it is one: a variant name, a stage name, a string parameter value, a module."""
    places: dict[str, set[str]] = {}
    for op in ops():
        for name, v in variants(op).items():
            places.setdefault(name, set()).add("variant")
            for p in v.params.values():
                for value in p.allowed:
                    if isinstance(value, str):
                        places.setdefault(value, set()).add("parameter value")
    stages = importlib.import_module("gpuopt.models.stages")
    for network in stages.STAGES:
        for name in stages.stages(network):
            places.setdefault(name, set()).add("stage")
    for path in (REPO / "gpuopt").rglob("*.py"):
        if not path.stem.startswith("_"):
            places.setdefault(path.stem, set()).add("module")
    return places


def _glossary_words() -> set[str]:
    words = set()
    for line in GLOSSARY.read_text().splitlines():
        if line.startswith("## "):
            words |= set(re.findall(r"`([^`]+)`", line))
    return words


#: Words with several meanings found by reading rather than by the public-name scan: each has its section.
READ_WORDS = ("fast", "plan", "stage", "step", "report", "variant", "tile", "unroll", "kernel")


def test_glossary_lists_every_word_with_two_meanings():
    """A public name that is at once two kinds of thing (a variant and a stage, a parameter value and a module,
    ...) has its section in docs/glossary.md, as does each word of READ_WORDS."""
    glossary = _glossary_words()
    several = {w: sorted(kinds) for w, kinds in _public_names().items() if len(kinds) > 1}
    assert "fast" in several, several  # the scan sees the word the glossary is first about
    missing = sorted((set(several) | set(READ_WORDS)) - glossary)
    assert not missing, "words with several meanings missing from docs/glossary.md: " + ", ".join(
        f"{w} ({', '.join(several.get(w, ['read']))})" for w in missing)


def test_glossary_names_no_name_that_is_gone():
    """Every ``gpuopt.x.y`` the glossary names is still there: a module, or a name in one."""
    for dotted in re.findall(r"`(gpuopt(?:\.\w+)+)`", GLOSSARY.read_text()):
        if dotted.startswith("gpuopt._cuda"):
            continue  # the compiled launchers: not in a CPU-only build
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                assert hasattr(obj, attr), f"docs/glossary.md names {dotted}, which is gone"
                obj = getattr(obj, attr)
            break
