"""Trajectory match: did the rerun make the calls the example expected, and none it must not?

The four modes and their verdicts are agentevals' trajectory-match evaluators' (docs/evaluators.md
"agentevals"; tests/test_evals_agentevals.py checks them against the library on generated
trajectories): calls are matched greedily, each expected call taking the first call not yet taken
with the same tool and arguments that compare equal, so duplicates count as often as they occur.
`strict` compares model turn by model turn (the calls one turn made in parallel share a `step`
and may come in any order within it); the other modes ignore turns and order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from runs.engine.evals.score import Score

TrajectoryMode = Literal["strict", "unordered", "subset", "superset"]
MODES: tuple[TrajectoryMode, ...] = ("strict", "unordered", "subset", "superset")
SHOWN_CALL_CHARS = 160
SHOWN_CALLS = 5


@dataclass(frozen=True)
class Call:
    """One tool call; calls of one model turn share `step` (None: a turn of its own)."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    step: str | None = None

    def shown(self) -> str:
        args = json.dumps(self.arguments, sort_keys=True, default=str)
        text = f"{self.tool}({args})"
        return (
            text
            if len(text) <= SHOWN_CALL_CHARS
            else text[: SHOWN_CALL_CHARS - 1] + "…"
        )


@dataclass(frozen=True)
class RefusedCall(Call):
    """A call a person (or a rule) rejected, and why."""

    reason: str = ""


def calls_of(items: Iterable[Mapping[str, Any]]) -> list[Call]:
    """Calls from a dataset's shape (`{tool, arguments, step_id}`, docs/datasets.md)."""
    return [
        Call(str(i["tool"]), dict(i.get("arguments") or {}), i.get("step_id"))
        for i in items
    ]


def refused_of(items: Iterable[Mapping[str, Any]]) -> list[RefusedCall]:
    """An example's `must_not_call` list as calls with their reasons."""
    return [
        RefusedCall(
            str(i["tool"]),
            dict(i.get("arguments") or {}),
            i.get("step_id"),
            str(i.get("reason") or ""),
        )
        for i in items
    ]


@dataclass(frozen=True)
class ArgumentRule:
    """How two calls' arguments compare: equal as JSON values (Python's `==`, as agentevals'
    `exact`), but leaving out `ignore_keys` (top-level names), numbers within `tolerance` of
    each other counting as equal; `ignore_all`: arguments are not compared (agentevals'
    `ignore`)."""

    ignore_all: bool = False
    ignore_keys: frozenset[str] = frozenset()
    tolerance: float = 0.0

    def __post_init__(self) -> None:
        if not self.tolerance >= 0:
            raise ValueError(
                f"tolerance: expected a number >= 0, got {self.tolerance!r}"
            )

    def same(self, got: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
        """Whether arguments `got` match those `expected` by this rule."""
        if self.ignore_all:
            return True
        if self.ignore_keys:
            got = {k: v for k, v in got.items() if k not in self.ignore_keys}
            expected = {k: v for k, v in expected.items() if k not in self.ignore_keys}
        if not self.tolerance:
            return dict(got) == dict(expected)
        return _close(dict(got), dict(expected), self.tolerance)

    def described(self) -> str:
        if self.ignore_all:
            return "arguments not compared"
        parts = ["arguments equal"]
        if self.ignore_keys:
            parts.append("ignoring " + ", ".join(sorted(self.ignore_keys)))
        if self.tolerance:
            parts.append(f"numbers within {self.tolerance:g}")
        return ", ".join(parts)


EXACT = ArgumentRule()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _close(a: Any, b: Any, tolerance: float) -> bool:
    if a == b:
        return True
    if _is_number(a) and _is_number(b):
        return bool(abs(a - b) <= tolerance)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], tolerance) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, tolerance) for x, y in zip(a, b))
    return False


Rules = Callable[[str], ArgumentRule]


def _rules(default: ArgumentRule, per_tool: Mapping[str, ArgumentRule] | None) -> Rules:
    overrides = dict(per_tool or {})
    return lambda tool: overrides.get(tool, default)


def _unmatched(
    wanted: Sequence[Call],
    offered: Sequence[Call],
    rule: Rules,
    *,
    wanted_first: bool = False,
) -> list[Call]:
    """The calls of `wanted` that no call of `offered` answers, each call of `offered` taken
    at most once, first come first taken (agentevals' `_is_trajectory_superset`). Arguments are
    compared as `rule.same(offered's, wanted's)`, the other way round with `wanted_first` (as
    agentevals' strict mode does)."""
    taken: set[int] = set()
    missing: list[Call] = []
    for want in wanted:
        same = rule(want.tool).same
        hit = next(
            (
                i
                for i, offer in enumerate(offered)
                if i not in taken
                and offer.tool == want.tool
                and (
                    same(want.arguments, offer.arguments)
                    if wanted_first
                    else same(offer.arguments, want.arguments)
                )
            ),
            None,
        )
        if hit is None:
            missing.append(want)
        else:
            taken.add(hit)
    return missing


def turns_of(calls: Sequence[Call]) -> list[list[Call]]:
    """The calls grouped by model turn: consecutive calls with one `step`."""
    turns: list[list[Call]] = []
    for call in calls:
        if turns and call.step is not None and turns[-1][0].step == call.step:
            turns[-1].append(call)
        else:
            turns.append([call])
    return turns


def _turn_matches(got: list[Call], expected: list[Call], rule: Rules) -> bool:
    """agentevals' strict comparison of one message's tool calls: as many, and each call got
    takes the first expected one not yet taken with its tool and matching arguments."""
    if len(got) != len(expected):
        return False
    return not _unmatched(got, expected, rule, wanted_first=True)


def _counted(n: int, what: str = "call") -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _listed(calls: Sequence[Call]) -> str:
    shown = ", ".join(c.shown() for c in calls[:SHOWN_CALLS])
    more = len(calls) - SHOWN_CALLS
    return shown + (f" and {more} more" if more > 0 else "")


def _strict(
    got: Sequence[Call], expected: Sequence[Call], rule: Rules, rule_told: str
) -> Score:
    key = "trajectory_strict_match"
    got_turns, expected_turns = turns_of(got), turns_of(expected)
    for n, (g, e) in enumerate(zip(got_turns, expected_turns), start=1):
        if not _turn_matches(g, e, rule):
            return Score.verdict(
                key, False, f"model turn {n}: expected {_listed(e)}; got {_listed(g)}"
            )
    if len(got_turns) != len(expected_turns):
        shorter = min(len(got_turns), len(expected_turns))
        if len(got_turns) > shorter:
            extra = [c for turn in got_turns[shorter:] for c in turn]
            told = f"calls after the expected ones: {_listed(extra)}"
        else:
            lacking = [c for turn in expected_turns[shorter:] for c in turn]
            told = f"expected calls not made: {_listed(lacking)}"
        return Score.verdict(
            key,
            False,
            f"expected {_counted(len(expected_turns), 'model turn')} with calls, got "
            f"{len(got_turns)}; {told}",
        )
    return Score.verdict(
        key,
        True,
        f"{_counted(len(got))} {'matches' if len(got) == 1 else 'match'} turn by turn, "
        f"in order; {rule_told}",
    )


def trajectory_match(
    got: Sequence[Call],
    expected: Sequence[Call],
    mode: TrajectoryMode = "strict",
    arguments: ArgumentRule = EXACT,
    per_tool: Mapping[str, ArgumentRule] | None = None,
) -> Score:
    """Whether the calls `got` match those `expected` in `mode` (agentevals' verdict), with
    arguments compared by `arguments` or a tool's own rule in `per_tool`.

    strict: the same calls, turn by turn, in order; unordered: the same calls in any order;
    subset: every call got was expected (some may be missing); superset: every expected call
    was made (others may be too)."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    rule = _rules(arguments, per_tool)
    if mode == "strict":
        return _strict(got, expected, rule, arguments.described())
    key = f"trajectory_{mode}_match"
    lacking = _unmatched(expected, got, rule) if mode != "subset" else []
    extra = _unmatched(got, expected, rule) if mode != "superset" else []
    problems = []
    if lacking:
        problems.append(f"expected but not made: {_listed(lacking)}")
    if extra:
        problems.append(f"made but not expected: {_listed(extra)}")
    if problems:
        return Score.verdict(key, False, "; ".join(problems))
    told = {
        "unordered": f"the same {_counted(len(got))}, in any order",
        "subset": f"every call made was expected ({len(got)} of {len(expected)})",
        "superset": f"every expected call was made ({len(expected)}, of {len(got)} made)",
    }[mode]
    return Score.verdict(key, True, f"{told}; {arguments.described()}")


def must_not_call(
    got: Sequence[Call],
    refused: Sequence[RefusedCall],
    arguments: ArgumentRule = EXACT,
) -> Score:
    """Fails when a call a person rejected is made again: the same tool with arguments that
    match by `arguments`; the explanation gives the reason they gave."""
    again = [
        (no, made)
        for no in refused
        if (
            made := [
                call
                for call in got
                if call.tool == no.tool and arguments.same(call.arguments, no.arguments)
            ]
        )
    ]
    if not again:
        return Score.verdict(
            "must_not_call",
            True,
            "no call was rejected"
            if not refused
            else "the rejected call was not made again"
            if len(refused) == 1
            else f"none of the {len(refused)} rejected calls was made again",
        )
    told = "; ".join(
        f"{made[0].shown()} was made again"
        + (f" ({len(made)} times)" if len(made) > 1 else "")
        + (
            f"; it was rejected: {no.reason}"
            if no.reason
            else "; it was rejected (no reason given)"
        )
        for no, made in again[:SHOWN_CALLS]
    )
    return Score.verdict("must_not_call", False, told)
