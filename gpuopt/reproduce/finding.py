"""What the results show for one item of the reproduction report (every report module returns one)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Finding", "missing", "g"]


@dataclass(frozen=True)
class Finding:
    """What the results show for one item."""

    printed: str            # what the report printed (numbers and its GPU), or that it printed none
    measured: str           # what was measured here (numbers); device, commit and date come from the meta
    ratio: str | None       # the report's number over ours (or ours over a baseline), where one applies
    verdict: str            # agrees / partly agrees (k of n claims hold) / differs, then the evidence
    claimed: str = ""       # the claims judged, each with where it is said (gpuopt.reproduce.claims)


def missing(what: str) -> Finding:
    return Finding("-", f"not in these results ({what})", None, "not measured here")


def g(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)
