"""Where gpuopt's compiled modules come from when this ``gpuopt/`` folder has none of its own.

``pip install .`` builds two extension modules, ``gpuopt._core`` (the CPU references) and ``gpuopt._cuda`` (the
kernels), and installs them with the Python sources into site-packages. A source checkout's ``gpuopt/`` folder
holds only the sources, and Python imports it first wherever the checkout's root is on ``sys.path``: ``python -m
gpuopt ...`` run in the checkout, a script or notebook kept there. Rather than fail, the package then takes the
compiled modules (and nothing else) from the installed gpuopt: the checkout's Python with the installed build, as
an editable install's import hook would give. The build records a digest of the C++ sources it compiled
(``_build.json``); when the checkout's differ, importing warns that the compiled modules are stale.

Pure Python, no gpuopt import: it runs before ``gpuopt._core`` exists.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
import warnings
from pathlib import Path

__all__ = ["COMPILED", "compiled_files", "find_installed", "use_installed", "sources_digest", "build_record"]

#: The extension modules a build installs beside the Python sources (``_cuda`` only when CUDA was built).
COMPILED = ("_core", "_cuda")

#: Written by the build beside the compiled modules: ``{"version", "sources_digest", "commit"}``.
BUILD_RECORD = "_build.json"


def compiled_files(folder: Path) -> dict[str, Path]:
    """The compiled modules in ``folder`` (a ``gpuopt`` package folder): name -> file."""
    found = {}
    for name in COMPILED:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if (folder / f"{name}{suffix}").is_file():
                found[name] = folder / f"{name}{suffix}"
                break
    return found


def find_installed(source: Path) -> Path | None:
    """The first ``gpuopt`` folder on ``sys.path`` other than ``source`` that holds a compiled ``_core``."""
    source = source.resolve()
    for entry in sys.path:
        folder = Path(entry or ".") / "gpuopt"
        try:
            if folder.resolve() != source and "_core" in compiled_files(folder):
                return folder
        except OSError:  # an unreadable sys.path entry
            continue
    return None


def sources_digest(checkout: Path) -> str | None:
    """SHA-256 over the C++ sources of a checkout (``csrc/`` and ``CMakeLists.txt``), as CMakeLists.txt computes it
    at build time: each file's path relative to the checkout and its SHA-256, one ``path:hash`` line each, sorted by
    path. None when ``checkout`` has no ``csrc/``."""
    csrc = checkout / "csrc"
    if not csrc.is_dir():
        return None
    files = sorted([p for p in csrc.rglob("*") if p.is_file()] + [checkout / "CMakeLists.txt"],
                   key=lambda p: p.relative_to(checkout).as_posix())
    lines = "".join(f"{p.relative_to(checkout).as_posix()}:{hashlib.sha256(p.read_bytes()).hexdigest()}\n"
                    for p in files if p.is_file())
    return hashlib.sha256(lines.encode()).hexdigest()


class _CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds ``gpuopt._core`` / ``gpuopt._cuda`` in the installed package, every other module where it is."""

    def __init__(self, files: dict[str, Path]):
        self.files = {f"gpuopt.{name}": path for name, path in files.items()}

    def find_spec(self, fullname, path=None, target=None):
        file = self.files.get(fullname)
        return None if file is None else importlib.util.spec_from_file_location(fullname, file)


def use_installed(source: Path) -> Path:
    """Make ``import gpuopt._core`` / ``gpuopt._cuda`` load the installed build's modules while the package's Python
    comes from ``source`` (a checkout's ``gpuopt/``); returns the installed folder. ImportError, saying what to run,
    when no installed build exists; a warning when the checkout's C++ sources are not the ones it was built from."""
    installed = find_installed(source)
    if installed is None:
        raise ImportError(
            f"gpuopt's compiled modules are not built: this import found the source folder {source}, which holds "
            f"none, and no installed gpuopt is on sys.path. Run `pip install -v .` in the checkout "
            f"({source.parent}) first; the source folder then uses the installed build.")
    if not any(isinstance(f, _CompiledFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _CompiledFinder(compiled_files(installed)))
    _warn_if_stale(source.parent, installed)
    return installed


def build_record(folder: Path) -> dict:
    """What the build installed in ``folder`` recorded (``version``, ``sources_digest``, ``commit``: the
    checkout's ``git rev-parse --short HEAD``, ``-dirty`` when it had changes, "unknown" outside git); {} when
    ``folder`` holds no record (a checkout's source folder)."""
    try:
        record = json.loads((folder / BUILD_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _warn_if_stale(checkout: Path, installed: Path) -> None:
    built = build_record(installed).get("sources_digest")
    here = sources_digest(checkout)
    if built and here and built != here:
        warnings.warn(f"gpuopt: the compiled modules in {installed} were built from other C++ sources than this "
                      f"checkout's ({checkout / 'csrc'}); run `pip install -v .` in {checkout} again to rebuild them",
                      RuntimeWarning, stacklevel=3)
