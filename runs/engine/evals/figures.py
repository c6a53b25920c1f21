"""Cost, tokens, latency, steps and human interventions of a rerun, as scores.

The figures are a notebook's as the traces list shows them (runs/traces/summary.py): a plain
dict with `cost_usd`, `tokens`, `wall_time_s`, `steps`, `human_actions`. A figure is its own
score; with a limit it also passes or fails.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from runs.engine.evals.score import Score

# the figure's key in the stored view, what it is called, its unit
FIGURES = (
    ("cost_usd", "cost", "USD"),
    ("tokens", "tokens", ""),
    ("wall_time_s", "latency", "s"),
    ("steps", "steps", ""),
    ("human_actions", "human interventions", ""),
)


@dataclass(frozen=True)
class FigureLimits:
    """The most each figure may be for its score to pass (None: no limit)."""

    cost_usd: float | None = None
    tokens: float | None = None
    wall_time_s: float | None = None
    steps: float | None = None
    human_actions: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            limit = getattr(self, f.name)
            if limit is not None and not (math.isfinite(limit) and limit >= 0):
                raise ValueError(f"{f.name}: expected a limit >= 0, got {limit!r}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def figure_scores(
    figures: Mapping[str, Any], limits: FigureLimits = FigureLimits()
) -> list[Score]:
    """One score per figure: its value, and whether it is within its limit when one is set."""
    scores = []
    for key, name, unit in FIGURES:
        value = _number(figures.get(key))
        limit = getattr(limits, key)
        if value is None:
            scores.append(Score(key, None, f"{name}: not recorded"))
            continue
        shown = f"{value:g}{' ' + unit if unit else ''}"
        if limit is None:
            scores.append(Score(key, value, f"{name}: {shown}"))
            continue
        passed = value <= limit
        scores.append(
            Score(
                key,
                value,
                f"{name}: {shown}, {'within' if passed else 'over'} the limit of {limit:g}",
                passed,
            )
        )
    return scores
