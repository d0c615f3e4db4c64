"""Command line: run the reports' networks stage by stage.

  python -m gpuopt.models mnist   [--images N] [--variant STAGE] [--model PATH] [--test-file PATH] [--batch N]
                                  [--timing]
  python -m gpuopt.models fashion [--images N] [--variant STAGE] [--seed S] [--weights NPZ] [--batch N] [--timing]
  python -m gpuopt.models stages  [mnist|fashion]

``mnist`` classifies the first N images of the real MNIST test set (t10k, uint8 pixels: divided by 255
on the device by the fast stage, on the host by the others), or of an ECE408 HDF5 test file, with the
trained ECE408 model, and compares the accuracy with the reference (1.0 / 0.95 / 0.8722 for the first
10 / 100 / 10,000 images). ``fashion`` runs the Fashion-MNIST network on seeded random weights and seeded
synthetic images (the trained model and the course's images are not public) and checks the stage against
the serial one. Both print the device, driver, CUDA and commit, the accuracy or agreement, the wall time,
and with ``--timing`` the per-layer table next to the report's times. Exit status 1 on a wrong result.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

from .._ext import cpu_choices_hint, cuda_available, cuda_unavailable_reason
from .._runinfo import environment_line
from .fashion import FashionCNN, synthetic_images
from .mnist import REFERENCE_ACCURACY, MnistCNN
from .network import DEFAULT_MEMORY_BUDGET, Network
from .stages import STAGES, cpu_stages, missing


def _int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``."""
    what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


_positive, _non_negative = _int_at_least(1), _int_at_least(0)


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(prog="python -m gpuopt.models", description=__doc__.split("\n")[0],
                                     epilog="Stages: " + "; ".join(f"{net}: {', '.join(t)}" for net, t in
                                                                   STAGES.items()),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="{mnist,fashion,stages}")

    def common(p: argparse.ArgumentParser, network: str, images_help: str) -> None:
        p.add_argument("--images", type=_positive, default=None, metavar="N", help=images_help)
        p.add_argument("--variant", choices=list(STAGES[network]), default=None, metavar="STAGE",
                       help=f"the stage: {', '.join(STAGES[network])} (default: fast with a GPU, else serial)")
        p.add_argument("--batch", type=_positive, default=None, metavar="N",
                       help="images per chunk (one op call); default: as many as fit --memory-budget-mb")
        p.add_argument("--memory-budget-mb", type=_positive, default=DEFAULT_MEMORY_BUDGET // 2**20, metavar="MB",
                       help="activation memory of one chunk when --batch is not given (default: %(default)s)")
        p.add_argument("--timing", action="store_true",
                       help="print the per-layer time table (CUDA events on the GPU) next to the report's times")
        p.add_argument("--warmup", type=_non_negative, default=1, metavar="N",
                       help="untimed calls on the first chunk before the measured one, GPU stages only "
                            "(default: %(default)s; they also upload the weights of device-resident stages)")

    pm = sub.add_parser("mnist", help="the ECE408 Fall 2016 MNIST CNN on the MNIST test set",
                        description="Classify MNIST test images with the trained ECE408 Fall 2016 model; print the "
                                    "accuracy (and the reference: 1.0 / 0.95 / 0.8722 for the first 10 / 100 / "
                                    "10,000 images) and the time.")
    common(pm, "mnist", "the first N test images (default: all 10,000, or every image of --test-file)")
    pm.add_argument("--model", default=None, metavar="PATH",
                    help="HDF5 model file of the ECE408 layout (default: ece408_2016fa/model.hdf5 of the data root)")
    pm.add_argument("--test-file", default=None, metavar="PATH",
                    help="an ECE408 HDF5 test file (/x float32 NHWC, /y one-hot) instead of MNIST t10k")

    pf = sub.add_parser("fashion", help="the ECE408 Spring 2018 Fashion-MNIST network, seeded weights and images",
                        description="Run the Fashion-MNIST network on seeded random weights (or --weights) and seeded "
                                    "synthetic 64x64 images (the trained model and the images are not public), and "
                                    "check the stage's logits and predictions against the serial stage.")
    common(pf, "fashion", "number of synthetic images (default: 10,000)")
    pf.add_argument("--seed", type=int, default=0, help="seed of the random weights and images (default: 0)")
    pf.add_argument("--weights", default=None, metavar="NPZ", help="weights .npz (see gpuopt.models.fashion)")
    pf.add_argument("--check-images", type=_non_negative, default=100, metavar="N",
                    help="compare the first N images with the serial stage (0: no check; default: %(default)s)")

    ps = sub.add_parser("stages", help="list every stage: the report table it reproduces and its ops")
    ps.add_argument("network", nargs="?", choices=list(STAGES), help="one network (default: both)")
    return parser, {"mnist": pm, "fashion": pf}


def _need_file(parser: argparse.ArgumentParser, option: str, path: str | None) -> None:
    if path is not None and not os.path.isfile(path):
        parser.error(f"{option}: no such file: {path}")


def cmd_stages(network: str | None) -> int:
    for net in [network] if network else list(STAGES):
        for stage in STAGES[net].values():
            absent = set(missing(stage, "*"))
            where = "device-resident" if stage.resident else "per-layer host round trips"
            print(f"{net}/{stage.name}  [{stage.table}]  {where}")
            print(f"    {stage.description}")
            for step in (*stage.steps, *stage.heads.values()):
                params = ", ".join(f"{k}={v!r}" for k, v in step.params.items())
                note = "  (not registered in this build)" if f"{step.op}/{step.variant}" in absent else ""
                print(f"    {step.name:40s} {step.op}/{step.variant}" + (f" ({params})" if params else "") + note)
    return 0


def _check_stage(parser: argparse.ArgumentParser, network: str, variant: str | None) -> str:
    if variant is None:
        fast = STAGES[network]["fast"]
        variant = "fast" if cuda_available() and not missing(fast, "*") else "serial"
    stage = STAGES[network][variant]
    absent = missing(stage, "predict")
    if absent:
        parser.error(f"stage {variant!r} needs {', '.join(absent)}, not registered in this build of gpuopt")
    if stage.gpu and not cuda_available():
        parser.error(f"stage {variant!r} needs a CUDA GPU, but {cuda_unavailable_reason()}."
                     f"{cpu_choices_hint(cpu_stages(network), '--variant')}")
    return variant


def _run(net: Network, images: Any, variant: str, args: argparse.Namespace) -> tuple[np.ndarray, Any, float]:
    """Warm up, then the measured predict: (predictions, ForwardTiming or None, wall ms)."""
    if STAGES[net.network][variant].gpu:
        first = images[: min(len(images), net.chunk_images(args.batch) or len(images))]
        for _ in range(args.warmup):
            net.predict(first, variant=variant, max_batch=args.batch)
    started = time.perf_counter()
    result = net.predict(images, variant=variant, timing=args.timing, max_batch=args.batch)
    wall = (time.perf_counter() - started) * 1e3
    pred, timing = result if args.timing else (result, None)
    return pred, timing, wall


def _print_time(net: Network, variant: str, n: int, wall: float, timing: Any, args: argparse.Namespace) -> None:
    size = min(net.chunk_images(args.batch) or n, n)
    print(f"chunks    {-(-n // size)} x up to {size:,} images"
          + ("" if args.batch else f" (memory budget {args.memory_budget_mb} MiB)"))
    warm = args.warmup if STAGES[net.network][variant].gpu else 0
    print(f"time      {wall:,.3f} ms wall for predict on {n:,} images, copies included"
          + (f" (after {warm} warm-up call(s))" if warm else ""))
    if timing is not None:
        print()
        print(timing.table())


def cmd_mnist(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from ..datasets import load_ece408_test, load_mnist

    variant = _check_stage(parser, "mnist", args.variant)
    _need_file(parser, "--model", args.model)
    _need_file(parser, "--test-file", args.test_file)
    budget = None if args.batch else args.memory_budget_mb * 2**20
    try:
        net = MnistCNN.from_file(args.model, max_batch=args.batch, memory_budget_bytes=budget)
        if args.test_file:
            images, labels = load_ece408_test(args.test_file, layout="nhwc")
            what = f"ECE408 test file {args.test_file} (float32 NHWC in [0, 1])"
        else:
            images, labels = load_mnist("t10k")
            what = "MNIST test set t10k (uint8 pixels, divided by 255 " + \
                   ("on the device)" if STAGES["mnist"][variant].resident else "on the host)")
    except (ValueError, FileNotFoundError, ImportError, TypeError) as exc:
        parser.error(str(exc))
    n = len(images) if args.images is None else args.images
    if n > len(images):
        parser.error(f"--images {n}: the {'test file' if args.test_file else 'test set'} has {len(images)} images")
    images, labels = images[:n], labels[:n]
    print(environment_line())
    print(f"network   {net.title} ({net.source})")
    stage = STAGES["mnist"][variant]
    print(f"stage     {variant}: {stage.description}")
    print(f"report    {stage.table}")
    print(f"images    the first {n:,} of the {what}")
    pred, timing, wall = _run(net, images, variant, args)
    correct = int(np.count_nonzero(pred == labels.astype(np.int64)))
    accuracy = correct / n
    line = f"accuracy  {accuracy:.4f} ({correct:,} / {n:,})"
    status = 0
    if args.model is None and n in REFERENCE_ACCURACY:
        expected = REFERENCE_ACCURACY[n]
        ok = correct == round(expected * n)
        status = 0 if ok else 1
        line += f"; reference {expected:.4f} for the first {n:,}: {'OK' if ok else 'MISMATCH'}"
    elif args.model is None:
        line += f"; the reference accuracies are for the first {', '.join(map(str, REFERENCE_ACCURACY))} images"
    print(line)
    _print_time(net, variant, n, wall, timing, args)
    return status


def cmd_fashion(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    variant = _check_stage(parser, "fashion", args.variant)
    _need_file(parser, "--weights", args.weights)
    budget = None if args.batch else args.memory_budget_mb * 2**20
    try:
        if args.weights:
            net = FashionCNN.from_file(args.weights, max_batch=args.batch, memory_budget_bytes=budget)
        else:
            net = FashionCNN.random(args.seed, max_batch=args.batch, memory_budget_bytes=budget)
    except (ValueError, FileNotFoundError, TypeError) as exc:
        parser.error(str(exc))
    n = 10000 if args.images is None else args.images
    images = synthetic_images(n, args.seed)
    stage = STAGES["fashion"][variant]
    print(environment_line())
    print(f"network   {net.title} ({net.source})")
    if not args.weights:
        print("          the trained weights are not public: seeded random weights, so no accuracy is measured")
    print(f"stage     {variant}: {stage.description}")
    print(f"report    {stage.table}")
    print(f"images    {n:,} seeded synthetic 64x64 uint8 images (seed {args.seed}), NOT Fashion-MNIST (not public)")
    pred, timing, wall = _run(net, images, variant, args)
    status = 0
    k = min(n, args.check_images)
    if k and variant != "serial":
        ref = net.forward(images[:k], variant="serial")
        logits = net.forward(images[:k], variant=variant, max_batch=args.batch)
        rel = float(np.abs(logits - ref).max() / max(float(np.abs(ref).max()), 1e-30))
        same = int(np.count_nonzero(pred[:k] == np.argmax(ref, axis=1)))
        ok = same == k and rel <= 1e-4
        status = 0 if ok else 1
        print(f"check     first {k:,} images vs the serial stage: {same:,} / {k:,} predictions equal, max |logit - "
              f"serial| / max |serial| = {rel:.2e}: {'OK' if ok else 'MISMATCH'}")
    counts = np.bincount(pred, minlength=net.classes)
    print(f"classes   predicted per class: {counts.tolist()}")
    _print_time(net, variant, n, wall, timing, args)
    return status


def main(argv: list[str] | None = None) -> int:
    parser, subs = _parser()
    args = parser.parse_args(argv)
    if args.cmd == "stages":
        return cmd_stages(args.network)
    if args.cmd == "mnist":
        return cmd_mnist(subs["mnist"], args)
    return cmd_fashion(subs["fashion"], args)


if __name__ == "__main__":
    sys.exit(main())
