"""What every evaluator returns."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    """One evaluator's verdict on one example.

    `score` is 1.0 or 0.0 for a match, the figure itself for cost, tokens and the like (None:
    not known); `passed` is whether it met what was asked (None: nothing was asked of it, as a
    figure with no limit)."""

    key: str
    score: float | None
    explanation: str
    passed: bool | None = None

    @classmethod
    def verdict(cls, key: str, passed: bool, explanation: str) -> Score:
        """A pass/fail score: 1.0 when it passed, else 0.0."""
        return cls(key, 1.0 if passed else 0.0, explanation, passed)
