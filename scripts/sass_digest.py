"""SASS identity of two builds: one sha256 per kernel, and a comparison of two such digests.

A refactor that only moves code (headers, namespaces, names of helpers) must leave the machine code of every
kernel as it was. This script takes the SASS of a built ``gpuopt/_cuda*.so`` (``cuobjdump -sass``), splits it
per kernel ("Function : <mangled name>") and hashes each body as printed: every instruction, its address
inside the function and its encoding, the ``.headerflags`` line. Nothing in a body is normalised.

One thing in the *names* is: nvcc names an anonymous namespace ``_GLOBAL__N__<h1>_<len><file>_<h2>``, where
``h1`` is a hash of the source file's absolute path (the same file built in two checkouts gets two ``h1``;
its contents, flags and defines do not change it). The digest writes ``h1`` as ``00000000`` so a build of
another worktree compares with the baseline; the file name and ``h2`` stay, and the mangled length prefix
is unchanged. ``--keep-path-hash`` keeps it. ``h2`` changes with the file's contents, so ``compare`` matches
kernels with it zeroed (a rename elsewhere in a file changes no kernel's name or body).

    python3 scripts/sass_digest.py digest /path/to/gpuopt/_cuda.cpython-311-x86_64-linux-gnu.so -o a.json
    python3 scripts/sass_digest.py digest --target /work/site/base-cuda -o base.json
    python3 scripts/sass_digest.py compare base.json a.json [--demangle]   # exit 1 on any difference
    python3 scripts/sass_digest.py compare base.json a1.json a2.json ...  # B: several builds of one tree
    python3 scripts/sass_digest.py names a.json                            # mangled -> demangled, one a line

The JSON is ``{mangled kernel name: sha256 of its SASS}``, sorted. A name met twice in one build (the same
kernel in two fatbins, e.g. two architectures) gets `` @<arch>#<n>`` appended from its second occurrence on.
cuobjdump and nvdisasm are looked for on PATH, in $CUDA_HOME/bin and /usr/local/cuda/bin, and in the
``nvidia-cuda-cuobjdump`` / ``nvidia-cuda-nvdisasm`` wheels (``pip install --target DIR ...``, then put
``DIR/nvidia/cu13/bin`` on PATH). Use one cuobjdump version for both sides of a comparison.

nvcc 13.0 does not always compile a file to the same SASS twice: a rebuild of csrc/conv/conv2d_direct.cu from
unchanged source changes a few conv2d_direct_regblock_kernel instantiations (the PTX that cicc writes differs
from run to run). Given several digests of rebuilds of one tree as B, compare counts a kernel as unchanged when
any of them has A's body (each B must hold the same kernels).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$")
_ARCH = re.compile(r"^\s*code for (sm_\w+)\s*$")
# A line that ends a function's body without being part of it: the next fatbin's header.
_FATBIN = re.compile(r"^Fatbin (elf|ptx) code:")
_PATH_HASH = re.compile(r"_GLOBAL__N__[0-9a-f]{8}_")


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    dirs = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin"), "/usr/local/cuda/bin"]
    for d in dirs:
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    sys.exit(f"sass_digest: {name} not found (PATH, $CUDA_HOME/bin); see this script's docstring")


def _nvdisasm_env() -> dict:
    # cuobjdump -sass runs nvdisasm; point it at one next to cuobjdump when PATH has none.
    env = dict(os.environ)
    if not shutil.which("nvdisasm", path=env.get("PATH")):
        here = os.path.dirname(_tool("cuobjdump"))
        if os.access(os.path.join(here, "nvdisasm"), os.X_OK):
            env["PATH"] = here + os.pathsep + env.get("PATH", "")
    return env


def find_so(target: str) -> str:
    hits = sorted(glob.glob(os.path.join(target, "gpuopt", "_cuda*.so")))
    if len(hits) != 1:
        sys.exit(f"sass_digest: expected one gpuopt/_cuda*.so under {target}, found {hits}")
    return hits[0]


def digest_lines(lines, keep_path_hash: bool = False) -> dict:
    """{kernel: sha256} from the text of ``cuobjdump -sass`` (an iterable of lines)."""
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    arch = "?"
    name = None
    h = None

    def close():
        if name is not None:
            n = seen.get(name, 0)
            seen[name] = n + 1
            key = name if n == 0 else f"{name} @{arch}#{n}"
            out[key] = h.hexdigest()

    for line in lines:
        m = _FUNCTION.match(line)
        if m:
            close()
            name = m.group(1) if keep_path_hash else _PATH_HASH.sub("_GLOBAL__N__00000000_", m.group(1))
            h = hashlib.sha256()
            continue
        if _FATBIN.match(line):
            close()
            name = None
            continue
        a = _ARCH.match(line)
        if a:
            arch = a.group(1)
        if name is not None:
            h.update(line.rstrip("\n").encode())
            h.update(b"\n")
    close()
    return dict(sorted(out.items()))


def digest_so(so: str, keep_path_hash: bool = False) -> dict:
    proc = subprocess.Popen([_tool("cuobjdump"), "-sass", so], stdout=subprocess.PIPE, text=True,
                            env=_nvdisasm_env(), bufsize=1 << 20)
    result = digest_lines(proc.stdout, keep_path_hash)
    if proc.wait() != 0:
        sys.exit(f"sass_digest: cuobjdump -sass {so} exited {proc.returncode}")
    if not result:
        sys.exit(f"sass_digest: no kernels found in {so}")
    return result


def demangle(names: list[str]) -> dict:
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None:
        return {n: n for n in names}
    bare = [n.split(" @", 1)[0] for n in names]
    res = subprocess.run([tool], input="\n".join(bare) + "\n", capture_output=True, text=True, check=True)
    pretty = res.stdout.splitlines()
    return {n: p + n[len(b):] for n, b, p in zip(names, bare, pretty)}


# ``h2`` (after the file name) changes with the file's contents: a rename elsewhere in the file changes it though no
# kernel changed. compare matches names with it zeroed.
_CONTENT_HASH = re.compile(r"(_GLOBAL__N__[0-9a-f]{8}_\d+_\w*?_(?:cu|cuh|cpp)_)[0-9a-f]{8}")


def _by_kernel(d: dict) -> dict:
    return {_CONTENT_HASH.sub(r"\g<1>00000000", k): v for k, v in d.items()}


def compare(a: dict, b: dict | list[dict], demangled: bool = False) -> int:
    a = _by_kernel(a)
    builds = [_by_kernel(x) for x in (b if isinstance(b, list) else [b])]
    b = builds[0]
    if any(x.keys() != b.keys() for x in builds[1:]):
        sys.exit("sass_digest: the B digests hold different kernels (not rebuilds of one tree)")
    changed = sorted(k for k in a.keys() & b.keys() if all(x[k] != a[k] for x in builds))
    only_a = sorted(a.keys() - b.keys())
    only_b = sorted(b.keys() - a.keys())
    show = demangle(changed + only_a + only_b) if demangled else {}
    for title, keys in (("changed", changed), ("only in A", only_a), ("only in B", only_b)):
        print(f"{title}: {len(keys)}")
        for k in keys:
            print(f"  {k}" + (f"\n      {show[k]}" if demangled else ""))
    same = len(a.keys() & b.keys()) - len(changed)
    print(f"identical: {same} of {len(a)} (A) / {len(b)} (B)")
    return 1 if (changed or only_a or only_b) else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("digest", help="write {kernel: sha256} of a build's SASS")
    d.add_argument("so", nargs="?", help="a built gpuopt/_cuda*.so")
    d.add_argument("--target", help="a pip --target site dir holding gpuopt/_cuda*.so")
    d.add_argument("-o", "--output", help="JSON file to write (default: stdout)")
    d.add_argument("--keep-path-hash", action="store_true", help="keep the anonymous namespaces' path hash")
    c = sub.add_parser("compare", help="changed / only in A / only in B; exit 1 on any difference")
    c.add_argument("a")
    c.add_argument("b", nargs="+", help="one digest, or several of rebuilds of one tree")
    c.add_argument("--demangle", action="store_true", help="also print each name demangled")
    n = sub.add_parser("names", help="print each kernel of a digest, mangled and demangled")
    n.add_argument("digest")
    args = p.parse_args(argv)

    if args.cmd == "digest":
        if (args.so is None) == (args.target is None):
            p.error("digest takes a .so or --target DIR (one of them)")
        so = args.so or find_so(args.target)
        text = json.dumps(digest_so(so, args.keep_path_hash), indent=1) + "\n"
        if args.output:
            Path(args.output).write_text(text)
        else:
            sys.stdout.write(text)
        return 0
    if args.cmd == "compare":
        a = json.loads(Path(args.a).read_text())
        b = [json.loads(Path(p).read_text()) for p in args.b]
        return compare(a, b, args.demangle)
    names = list(json.loads(Path(args.digest).read_text()))
    for k, v in demangle(names).items():
        print(f"{k}\t{v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
