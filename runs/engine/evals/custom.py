"""Custom evaluators: Python callables a deployment names by dotted path (`AGENTUI_EVALUATORS`).

A custom evaluator is called as `evaluator(example, outcome)`, both plain dicts: the dataset
example (`input`, `expected_output`, `metadata`, docs/datasets.md) and what the rerun did
(`answer`, `calls`, `figures`). It returns a `Score`, a bool or a number (its score), or a
`(score, explanation)` pair; one that raises or returns something else scores None with the
reason, and the other evaluators go on.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runs.engine.evals.score import Score

SETTING = "AGENTUI_EVALUATORS"
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
MAX_EXPLANATION_CHARS = 2_000

EvaluatorFunction = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]


class EvaluatorPathError(ValueError):
    """A custom evaluator's path that does not name a callable; the message names the path."""


@dataclass(frozen=True)
class CustomEvaluator:
    """A custom evaluator and the path it was named by (its score's key)."""

    path: str
    function: EvaluatorFunction

    def __call__(self, example: Mapping[str, Any], outcome: Mapping[str, Any]) -> Score:
        try:
            made = self.function(example, outcome)
        except Exception as error:  # its bug is its score's, not the experiment's
            return Score(
                self.path,
                None,
                f"failed: {type(error).__name__}: {error}"[:MAX_EXPLANATION_CHARS],
            )
        return _as_score(self.path, made)


def _as_score(key: str, made: Any) -> Score:
    if isinstance(made, Score):
        return made
    if isinstance(made, bool):
        return Score.verdict(key, made, "passed" if made else "failed")
    if isinstance(made, (int, float)):
        return Score(key, float(made), f"{made:g}")
    if (
        isinstance(made, tuple)
        and len(made) == 2
        and isinstance(made[0], (int, float))
        and isinstance(made[1], str)
    ):
        score, told = made
        if isinstance(score, bool):
            return Score.verdict(key, score, told[:MAX_EXPLANATION_CHARS])
        return Score(key, float(score), told[:MAX_EXPLANATION_CHARS])
    return Score(
        key,
        None,
        f"returned a {type(made).__name__}; expected a Score, a bool, a number or "
        "(score, explanation)",
    )


def check_path(path: str) -> str:
    """`path` if it reads as `module.name`; EvaluatorPathError otherwise (nothing imported)."""
    if not DOTTED.fullmatch(path):
        raise EvaluatorPathError(
            f"{SETTING}: {path!r} is not a dotted path such as myproject.evals.tone"
        )
    return path


def load_evaluator(path: str) -> CustomEvaluator:
    """The callable `path` names (`package.module.function`); EvaluatorPathError saying why
    not: not a dotted path, no such module, no such name in it, or not callable."""
    module_name, _, name = check_path(path).rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise EvaluatorPathError(
            f"{SETTING}: {path!r}: cannot import {module_name!r} ({error})"
        ) from None
    function = getattr(module, name, None)
    if function is None:
        raise EvaluatorPathError(f"{SETTING}: {path!r}: {module_name} has no {name!r}")
    if not callable(function):
        raise EvaluatorPathError(
            f"{SETTING}: {path!r} is a {type(function).__name__}, not a callable"
        )
    return CustomEvaluator(path, function)


def load_evaluators(paths: Sequence[str]) -> list[CustomEvaluator]:
    """Every path's evaluator, in order; EvaluatorPathError at the first bad one."""
    return [load_evaluator(path) for path in paths]
