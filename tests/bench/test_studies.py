"""The study machinery and the collection of studies."""

from __future__ import annotations

import gpuopt
from gpuopt.bench import study
from gpuopt.bench.study import Plan


def test_studies_skip_missing_variants(monkeypatch):
    # A variant another engineer has not registered yet is skipped with a note.
    notes: list[str] = []
    plan = Plan(gpu=True, tiny=True)
    monkeypatch.setattr(gpuopt.registry.Variant, "available", property(lambda self: True))
    chosen = study._select("conv2d", ("no_such_variant", "cpu"), plan, notes)
    assert chosen == ["cpu"]
    assert any("no_such_variant" in n and "not registered" in n for n in notes)
