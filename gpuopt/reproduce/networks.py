"""The ``networks`` study's whole-network rows, as both ECE408 reports' items read them."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .claims import Check, Rows
from .finding import g

__all__ = ["network_rows", "network_measured", "faster_than_pytorch"]


def network_rows(rows: Rows, network: str) -> dict[str, Mapping[str, Any]]:
    """The networks study's whole-network rows of ``network`` at its largest batch, by stage."""
    net = [r for r in rows if r.get("kind") == "network" and r.get("network") == network]
    if not net:
        return {}
    top = max(r.get("images") or 0 for r in net)
    return {r.get("stage"): r for r in net if (r.get("images") or 0) == top}


def faster_than_pytorch(network: str) -> Callable[[Rows], Check | None]:
    def check(rows: Rows) -> Check | None:
        net = network_rows(rows, network)
        fast, torch = net.get("fast"), net.get("pytorch")
        if not fast or not torch or not fast.get("device_ms") or not torch.get("device_ms"):
            return None
        return Check(torch["device_ms"] > fast["device_ms"],
                     f"fast stage {torch['device_ms'] / fast['device_ms']:.2f}x PyTorch FP32, device-resident")
    return check


def network_measured(rows: Rows, network: str) -> tuple[str, str | None] | None:
    net = network_rows(rows, network)
    fast, torch = net.get("fast"), net.get("pytorch")
    if not fast:
        return None
    acc = fast.get("accuracy")
    measured = (f"{fast.get('images'):,} images: fast stage {g(fast.get('device_ms'))} ms device-resident, "
                f"{g(fast.get('numpy_ms'))} ms NumPy in/out; PyTorch {g((torch or {}).get('device_ms'))} / "
                f"{g((torch or {}).get('numpy_ms'))} ms" + (f"; accuracy {acc}" if acc is not None else ""))
    ratio = (f"{torch['device_ms'] / fast['device_ms']:.2f}x faster than PyTorch FP32 (device-resident, same run)"
             if torch and torch.get("device_ms") and fast.get("device_ms") else None)
    return measured, ratio
