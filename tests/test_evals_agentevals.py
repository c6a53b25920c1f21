"""Our trajectory match agrees with agentevals' trajectory-match evaluators, verdict for verdict.

Hypothesis generates pairs of trajectories (model turns of one to three calls, a few tools,
small argument values so that calls often match, duplicates and reorderings included); each is
scored by `runs.engine.evals.trajectory_match` and by `agentevals`'
`create_trajectory_match_evaluator` given the same trajectories as OpenAI messages, in every
mode and with each argument rule: exact and "ignore" are agentevals' own modes; ignoring named
keys and numeric tolerance are given to it as per-tool matchers written here, independently of
ours. agentevals is a test dependency only (requirements-test.txt).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.engine.evals import ArgumentRule, Call, must_not_call, trajectory_match
from runs.engine.evals.trajectory import RefusedCall

os.environ.setdefault("LANGSMITH_TRACING", "false")  # never reach LangSmith
match_module = pytest.importorskip("agentevals.trajectory.match")

TOOLS = ("add", "search", "lookup")
MODES = ("strict", "unordered", "subset", "superset")
values = st.one_of(
    st.sampled_from([0, 1, 2, 0.5, 1.0, 1.25, 2.0, -1, "x", "y", True, False, None]),
    st.lists(st.sampled_from([0, 1, 1.5]), max_size=2),
)
arguments = st.dictionaries(st.sampled_from(["a", "b", "q"]), values, max_size=3)
call = st.tuples(st.sampled_from(TOOLS), arguments)
turns = st.lists(st.lists(call, min_size=1, max_size=3), max_size=4)


def as_calls(trajectory: list[list[tuple[str, dict[str, Any]]]]) -> list[Call]:
    return [
        Call(tool, args, f"s-{n}")
        for n, turn in enumerate(trajectory)
        for tool, args in turn
    ]


def as_messages(
    trajectory: list[list[tuple[str, dict[str, Any]]]],
) -> list[dict[str, Any]]:
    """The trajectory as an OpenAI chat: the question, then per model turn its assistant
    message with its tool calls and a tool message per call."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for n, turn in enumerate(trajectory):
        ids = [f"call_{n}_{i}" for i in range(len(turn))]
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": ids[i],
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(args)},
                    }
                    for i, (tool, args) in enumerate(turn)
                ],
            }
        )
        messages += [{"role": "tool", "content": "ok", "tool_call_id": i} for i in ids]
    return messages


def without(keys: set[str]) -> Any:
    def matcher(got: dict[str, Any], expected: dict[str, Any]) -> bool:
        kept = [{k: v for k, v in d.items() if k not in keys} for d in (got, expected)]
        return kept[0] == kept[1]

    return matcher


def near(a: Any, b: Any, tolerance: float) -> bool:
    numbers = (int, float)
    if type(a) in numbers and type(b) in numbers:
        return math.isclose(a, b, rel_tol=0, abs_tol=tolerance)
    if type(a) is dict and type(b) is dict:
        return sorted(a) == sorted(b) and all(near(a[k], b[k], tolerance) for k in a)
    if type(a) is list and type(b) is list:
        return len(a) == len(b) and all(near(x, y, tolerance) for x, y in zip(a, b))
    return bool(a == b)


def within(tolerance: float) -> Any:
    return lambda got, expected: near(got, expected, tolerance)


# (our rule, agentevals' tool_args_match_mode, its overrides)
RULES = [
    ("exact", ArgumentRule(), "exact", None),
    ("ignore", ArgumentRule(ignore_all=True), "ignore", None),
    ("ignore keys", ArgumentRule(ignore_keys=frozenset({"q"})), "exact", "keys"),
    ("tolerance", ArgumentRule(tolerance=0.5), "exact", "tolerance"),
]


def their_overrides(kind: str | None) -> dict[str, Any] | None:
    if kind == "keys":
        return {tool: without({"q"}) for tool in TOOLS}
    if kind == "tolerance":
        return {tool: within(0.5) for tool in TOOLS}
    return None


def their_verdict(
    mode: str, args_mode: str, overrides: Any, got: Any, expected: Any
) -> bool:
    evaluator = match_module.create_trajectory_match_evaluator(
        trajectory_match_mode=mode,
        tool_args_match_mode=args_mode,
        tool_args_match_overrides=overrides,
    )
    result = evaluator(
        outputs=as_messages(got), reference_outputs=as_messages(expected)
    )
    return bool(result["score"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rule_name, ours, args_mode, overrides", RULES)
@settings(
    # 16 mode x rule pairs, 60 generated pairs each (960 in all, beside the targeted cases
    # below): the suite runs on two cores, and each example builds agentevals' LangChain objects
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(got=turns, expected=turns)
def test_verdicts_agree_with_agentevals(
    mode: str,
    rule_name: str,
    ours: ArgumentRule,
    args_mode: str,
    overrides: str | None,
    got: Any,
    expected: Any,
) -> None:
    theirs = their_verdict(mode, args_mode, their_overrides(overrides), got, expected)
    score = trajectory_match(as_calls(got), as_calls(expected), mode, ours)  # type: ignore[arg-type]
    assert score.passed is theirs, (mode, rule_name, score.explanation)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=50, deadline=None)
@given(got=turns, expected=turns)
def test_a_tool_of_its_own_rule_agrees(mode: str, got: Any, expected: Any) -> None:
    """Per-tool rules are agentevals' `tool_args_match_overrides`: `search` ignores its
    arguments, the others compare theirs exactly."""
    theirs = their_verdict(mode, "exact", {"search": "ignore"}, got, expected)
    ours = trajectory_match(
        as_calls(got),
        as_calls(expected),
        mode,  # type: ignore[arg-type]
        per_tool={"search": ArgumentRule(ignore_all=True)},
    )
    assert ours.passed is theirs, (mode, ours.explanation)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=50, deadline=None)
@given(expected=turns, data=st.data())
def test_a_trajectory_matches_itself_and_its_shuffles(
    mode: str, expected: Any, data: st.DataObject
) -> None:
    """Generated pairs rarely match; these do in every mode (a shuffle in all but strict),
    and agentevals says so too, so the agreement above is not only on failures."""
    same = trajectory_match(as_calls(expected), as_calls(expected), mode)  # type: ignore[arg-type]
    assert same.passed is True
    assert their_verdict(mode, "exact", None, expected, expected) is True
    flat = [c for turn in expected for c in turn]
    shuffled = [[c] for c in data.draw(st.permutations(flat))]
    theirs = their_verdict(mode, "exact", None, shuffled, expected)
    ours = trajectory_match(as_calls(shuffled), as_calls(expected), mode)  # type: ignore[arg-type]
    assert ours.passed is theirs
    if mode != "strict":
        assert ours.passed is True
    # the calls of one model turn in another order: the same turn, in strict mode too
    reordered = [list(data.draw(st.permutations(turn))) for turn in expected]
    assert their_verdict(mode, "exact", None, reordered, expected) is True
    assert (
        trajectory_match(as_calls(reordered), as_calls(expected), mode).passed is True
    )  # type: ignore[arg-type]
    # two turns made one: only strict tells them apart
    if len(expected) >= 2:
        merged = [expected[0] + expected[1], *expected[2:]]
        theirs = their_verdict(mode, "exact", None, merged, expected)
        ours = trajectory_match(as_calls(merged), as_calls(expected), mode)  # type: ignore[arg-type]
        assert ours.passed is theirs is (mode != "strict")


def test_first_come_pairing_as_agentevals_does_even_where_a_better_one_exists() -> None:
    """docs/evaluators.md's example: 1.0 takes 1.5 first, and 1.6 is left with 0.9."""
    expected = [[("add", {"a": 1.0})], [("add", {"a": 1.6})]]
    got = [[("add", {"a": 1.5})], [("add", {"a": 0.9})]]
    theirs = their_verdict(
        "superset", "exact", their_overrides("tolerance"), got, expected
    )
    ours = trajectory_match(
        as_calls(got), as_calls(expected), "superset", ArgumentRule(tolerance=0.5)
    )
    assert theirs is False and ours.passed is False
    assert ours.explanation == 'expected but not made: add({"a": 1.6})'


refused_calls = st.lists(
    st.tuples(call, st.sampled_from(["not needed", "too costly", ""])), max_size=3
)


@pytest.mark.parametrize("rule_name, ours, args_mode, overrides", RULES)
@settings(max_examples=150, deadline=None)
@given(got=turns, refused=refused_calls)
def test_a_rejected_call_made_again_fails_with_its_reason(
    rule_name: str,
    ours: ArgumentRule,
    args_mode: str,
    overrides: str | None,
    got: Any,
    refused: Any,
) -> None:
    """must_not_call fails exactly when, for some rejected call, agentevals finds the rerun's
    trajectory a superset of that one call; the explanation names each with its reason."""
    made_again = [
        ((tool, args), reason)
        for (tool, args), reason in refused
        if their_verdict(
            "superset", args_mode, their_overrides(overrides), got, [[(tool, args)]]
        )
    ]
    score = must_not_call(
        as_calls(got),
        [RefusedCall(tool, args, None, reason) for (tool, args), reason in refused],
        ours,
    )
    assert score.passed is (not made_again), (rule_name, score.explanation)
    for (tool, _), reason in made_again:
        assert f"{tool}(" in score.explanation
        assert (
            f"rejected: {reason}" if reason else "(no reason given)"
        ) in score.explanation


# one tool, one number: where a tolerance pairs calls non-transitively (0 ~ 0.5 ~ 1, 0 ≁ 1),
# so that the pairing order, not only the rule, decides the verdict
close_calls = st.lists(
    st.lists(
        st.tuples(
            st.just("add"),
            st.fixed_dictionaries({"a": st.sampled_from([0, 0.5, 1.0, 1.5, 2])}),
        ),
        min_size=1,
        max_size=2,
    ),
    max_size=4,
)


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=200, deadline=None)
@given(got=close_calls, expected=close_calls)
def test_pairing_within_a_tolerance_agrees(mode: str, got: Any, expected: Any) -> None:
    theirs = their_verdict(mode, "exact", their_overrides("tolerance"), got, expected)
    ours = trajectory_match(
        as_calls(got),
        as_calls(expected),
        mode,  # type: ignore[arg-type]
        ArgumentRule(tolerance=0.5),
    )
    assert ours.passed is theirs, (mode, ours.explanation)
