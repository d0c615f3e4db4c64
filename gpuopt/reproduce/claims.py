"""A report's claims as data, and the verdicts computed from them.

A :class:`Claim` is one statement a report made, quoted from its seed file (``../shared/seeds/``, the line numbers
cited) or, for gpuopt's own items, one of gpuopt's stated goals (no seed); its ``check(rows)`` reads a study's
results rows and says whether the claim holds there, with the evidence (the measured ranking or value beside the
claim), or None when the rows cannot say. :func:`judge` turns an item's claims into its verdict, which starts with
**agrees** (every claim that could be checked holds), **partly agrees** (how many hold) or **differs** (none holds).
Numbers measured on different hardware are compared by ranking and ratio, never by absolute time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

__all__ = ["Claim", "Check", "Judgement", "judge", "quoting", "gain", "best", "VERDICT_WORDS", "SEEDS_ENV",
           "seeds_dir", "seed_text", "quote_found"]

Rows = Sequence[Mapping[str, Any]]

#: The words every verdict starts with.
VERDICT_WORDS = ("agrees", "partly agrees", "differs")

#: Where the reports' text files are looked for first (else ``seeds`` beside the data folder: shared/seeds).
SEEDS_ENV = "GPUOPT_SEEDS_DIR"


def seeds_dir() -> Path | None:
    """The folder of the reports' text files: ``$GPUOPT_SEEDS_DIR``, else ``seeds`` beside gpuopt's data folder
    (``shared/seeds`` beside ``shared/data``: gpuopt.datasets.data_dir); None when there is none."""
    import os

    from gpuopt.datasets import data_dir

    env = os.environ.get(SEEDS_ENV, "")
    if env:
        return Path(env) if Path(env).is_dir() else None
    data = data_dir(required=False)
    seeds = data.parent / "seeds" if data is not None else None
    return seeds if seeds is not None and seeds.is_dir() else None


@dataclass(frozen=True)
class Check:
    """Whether a claim holds in the results, and the measured evidence (one phrase)."""

    holds: bool
    evidence: str


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a report (or of gpuopt, for its own items)."""

    says: str                                   # the statement as checked: a ranking, a best parameter, a trend
    check: Callable[[Rows], Check | None]       # against a study's rows; None: these rows cannot say
    quote: str = ""                             # the report's words, verbatim (whitespace aside)
    seed: str | None = None                     # the seed file it is quoted from (None: gpuopt's own goal)
    lines: tuple[int, int] | None = None        # first and last line of the quote in the seed

    @property
    def cite(self) -> str:
        """Where it is said: ``seed l.a-b``, or ``gpuopt's goal``."""
        if self.seed is None or self.lines is None:
            return "gpuopt's goal"
        a, b = self.lines
        return f"{self.seed} l.{a}" + (f"-{b}" if b != a else "")


def quoting(seed: str) -> Callable[..., Claim]:
    """``c(says, check, quote, first_line, last_line=None)``: a Claim quoted from ``seed``."""
    def claim(says: str, check: Callable[[Rows], Check | None], quote: str, first: int,
              last: int | None = None) -> Claim:
        return Claim(says, check, quote, seed, (first, last or first))
    return claim


Values = Callable[[Rows], Mapping[str, float]]


def gain(values: Values, before: str, after: str, *, higher_is_better: bool = False,
         where: str = "") -> Callable[[Rows], Check | None]:
    """A step's claim: ``after`` better than ``before`` among ``values(rows)`` (times, or rates with
    ``higher_is_better``); the evidence is the ratio (``where`` names what was compared)."""
    def check(rows: Rows) -> Check | None:
        v = values(rows)
        if before not in v or after not in v:
            return None
        ratio = v[after] / v[before] if higher_is_better else v[before] / v[after]
        return Check(ratio > 1.0, f"{after} {ratio:.2f}x {before}{where}")
    return check


def best(values: Values, want: str, among: Sequence[str], *, higher_is_better: bool = False,
         unit: str = "") -> Callable[[Rows], Check | None]:
    """A ranking claim: ``want`` the best of ``among`` in ``values(rows)`` (None unless every one was measured)."""
    def check(rows: Rows) -> Check | None:
        v = values(rows)
        if not all(k in v for k in among):
            return None
        top = (max if higher_is_better else min)(among, key=v.get)
        other = "" if top == want else f", {want} {v[want]:.4g}{unit}"
        return Check(top == want, f"best {top} {v[top]:.4g}{unit}{other}")
    return check


@dataclass(frozen=True)
class Judgement:
    """An item's claims judged: the verdict line and what was claimed (for the overview table)."""

    verdict: str
    claimed: str
    held: int
    checked: int


def judge(claims: Sequence[Claim], rows: Rows, why_differs: str = "") -> Judgement:
    """The verdict of ``claims`` on ``rows``: agrees / partly agrees (k of n claims hold) / differs, then the
    evidence of each checked claim in one sentence (``why_differs``, the measured reason, added where some claim
    fails)."""
    results = [(c, c.check(rows)) for c in claims]
    checked = [(c, r) for c, r in results if r is not None]
    held = [c for c, r in checked if r.holds]
    claimed = "; ".join(f"{c.says} ({c.cite})" for c in claims)
    if not checked:
        return Judgement("differs: none of its claims can be checked on these results", claimed, 0, 0)
    if len(held) == len(checked):
        word = "agrees"
    elif held:
        word = f"partly agrees ({len(held)} of {len(checked)} claims hold)"
    else:
        word = "differs"
    evidence = "; ".join(f"{c.says}: {'holds' if r.holds else 'does not hold'} ({r.evidence})" for c, r in checked)
    reason = f" -- {why_differs}" if why_differs and len(held) < len(checked) else ""
    return Judgement(f"{word}: {evidence}{reason}", claimed, len(held), len(checked))


def seed_text(seed: str) -> list[str] | None:
    """The lines of a seed file (None where the seeds are not beside the checkout)."""
    folder = seeds_dir()
    path = folder / seed if folder is not None else None
    return path.read_text(encoding="utf-8").splitlines() if path is not None and path.is_file() else None


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def quote_found(claim: Claim) -> bool | None:
    """Whether ``claim.quote`` is in its seed at the lines it cites (whitespace collapsed); None without the seeds."""
    lines = seed_text(claim.seed) if claim.seed else None
    if lines is None or claim.lines is None:
        return None
    a, b = claim.lines
    return _squash(claim.quote) in _squash(" ".join(lines[a - 1:b]))
