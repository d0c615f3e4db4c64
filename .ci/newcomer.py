#!/usr/bin/env python3
"""A newcomer's first hour, as CI: every command of the README run as typed, and every notebook executed.

    python .ci/newcomer.py CHECKOUT --elsewhere DIR [--gpu] [--installed] [--no-notebooks] [--except REGEX]

The README's fenced blocks say where their commands run, by the words after the language:

* ``bash``              from the checkout's root, then again from DIR (another folder);
* ``bash checkout``     from the checkout's root only (the install, the tests, paths into the checkout);
* ``bash gpu``          on a GPU machine only (run with ``--gpu``), from both folders (``bash gpu checkout``: the
                        root only);
* ``bash interactive``  not run (``jupyter lab``): the notebooks are executed below instead;
* ``python``            as a script, from the checkout's root and from DIR.

Every command must exit 0 and print no "not found" and no traceback (an install: exit 0). ``--installed`` skips the ``pip install``
lines (a machine without a network, gpuopt already installed). Then each notebook of ``notebooks/`` is executed
by a Jupyter kernel started in ``notebooks/`` (as ``jupyter lab`` opens it, needs nbclient and ipykernel), with
no gpuopt environment variable set: a cell's error, a "not found" in any output, or a cell that shows a committed
figure (``show("....png")``) without an image in its output fails the run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

WORDS = {"checkout", "gpu", "interactive"}  # what may follow the language in a block's info string
BAD = re.compile(r"not found|Traceback \(most recent call last\)", re.IGNORECASE)


def blocks(readme: Path) -> list[tuple[str, str, int]]:
    """(info string, text, line number) of every fenced block of ``readme``."""
    found, lines = [], readme.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(.*)$", lines[i])
        if m:
            start, info, body = i + 1, m.group(1).strip(), []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            found.append((info, "\n".join(body) + "\n", start + 1))
        i += 1
    return found


def commands(readme: Path) -> list[tuple[frozenset[str], str, str, int]]:
    """(words, language, command, README line) in README order: a bash block gives one command a line (comments
    and blank lines skipped), a python block one script; ``words`` are the block's (``checkout``, ``gpu``,
    ``interactive``). SystemExit on a bash or python block with another word."""
    out = []
    for info, text, line in blocks(readme):
        language, *rest = info.split() or [""]
        if language not in ("bash", "python", "sh", "console"):
            continue
        words = frozenset(rest)
        if language not in ("bash", "python") or not words <= WORDS or (language == "python" and words):
            raise SystemExit(f"README.md:{line}: block '{info}' is not bash [{' '.join(sorted(WORDS))}] or python")
        if language == "python":
            out.append((words, "python", text, line))
            continue
        for k, cmd in enumerate(text.splitlines()):
            if cmd.strip() and not cmd.lstrip().startswith("#"):
                out.append((words, "bash", cmd, line + k))
    return out


def run(cmd: str, language: str, cwd: Path, env: dict[str, str], line: int) -> bool:
    """Run one command, its output streamed as it comes; True when it exited 0 and printed nothing bad. An install
    is judged by its exit status alone: CMake's probes print "not found" for what a build can do without."""
    argv = [sys.executable, "-c", cmd] if language == "python" else ["bash", "-c", cmd]
    shown = cmd if language == "bash" else f"<python block of README.md:{line}>"
    print(f"\n$ (cd {cwd} && {shown})", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    for text in proc.stdout:
        out.append(text)
        print(text, end="", flush=True)
    proc.wait()
    install = re.match(r"\s*(python3? -m )?pip install", cmd) is not None
    bad = None if install else BAD.search("".join(out))
    ok = proc.returncode == 0 and bad is None
    print(f"  -> exit {proc.returncode}, {time.perf_counter() - t0:.1f} s"
          + ("" if bad is None else f", printed {bad.group(0)!r}") + ("" if ok else "  FAILED"), flush=True)
    return ok


def execute_notebooks(checkout: Path, env: dict[str, str]) -> list[str]:
    """Run every notebook in a kernel started in notebooks/; the list of problems found."""
    import nbformat
    from nbclient import NotebookClient

    problems = []
    folder = checkout / "notebooks"
    for path in sorted(folder.glob("*.ipynb")):
        t0 = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        os.environ.clear()
        os.environ.update(env)  # the kernel inherits this process's environment
        try:
            NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(folder)}},
                           allow_errors=True).execute()
        except Exception as exc:  # noqa: BLE001 - a kernel that dies is a failure to report, not to raise
            problems.append(f"{path.name}: the kernel failed: {exc!r}")
            continue
        for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
            texts, images = [], 0
            for o in cell.get("outputs", []):
                if o.output_type == "error":
                    problems.append(f"{path.name} cell {i}: {o.ename}: {o.evalue}")
                texts.append(o.get("text", ""))
                data = o.get("data", {})
                texts.append(data.get("text/plain", ""))
                images += "image/png" in data
            bad = BAD.search("".join(texts))
            if bad:
                problems.append(f"{path.name} cell {i}: printed {bad.group(0)!r}")
            if re.search(r"show\(f?[\"'][^\"']*\.png", cell.source) and not images:
                problems.append(f"{path.name} cell {i}: shows a committed figure but its output has no image")
        print(f"  {path.name}: executed in {time.perf_counter() - t0:.1f} s", flush=True)
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkout", type=Path)
    ap.add_argument("--elsewhere", type=Path, required=True, help="another folder, outside the checkout")
    ap.add_argument("--gpu", action="store_true", help="also run the README's GPU blocks")
    ap.add_argument("--installed", action="store_true", help="skip the pip install lines (gpuopt is installed)")
    ap.add_argument("--no-notebooks", action="store_true", help="do not execute the notebooks")
    ap.add_argument("--except", dest="skip", action="append", default=[], metavar="REGEX",
                    help="skip the commands this matches (e.g. what a GPU machine runs apart: the whole test suite)")
    args = ap.parse_args(argv)
    checkout, elsewhere = args.checkout.resolve(), args.elsewhere.resolve()
    elsewhere.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUOPT_")}  # as a newcomer has it
    failed = []
    for words, language, cmd, line in commands(checkout / "README.md"):
        if "interactive" in words or ("gpu" in words and not args.gpu):
            print(f"\n(not run: README.md:{line}, {' '.join(sorted(words))}: {cmd.strip()})")
            continue
        if args.installed and re.match(r"\s*(python3? -m )?pip install", cmd):
            print(f"\n(not run, --installed: README.md:{line}: {cmd.strip()})")
            continue
        if any(re.search(rx, cmd) for rx in args.skip):
            print(f"\n(not run, --except: README.md:{line}: {cmd.strip()})")
            continue
        for cwd in [checkout] + ([elsewhere] if "checkout" not in words else []):
            if not run(cmd, language, cwd, env, line):
                failed.append(f"README.md:{line} in {cwd}: {cmd.strip().splitlines()[0]}")
    if not args.no_notebooks:
        print("\n== the notebooks, executed from notebooks/", flush=True)
        failed += execute_notebooks(checkout, env)
    print("\n" + ("every README command and notebook works as typed" if not failed else
                  f"{len(failed)} failure(s):\n  " + "\n  ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
