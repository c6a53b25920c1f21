"""The condition a rule puts on a call's arguments: read strictly, matched without evaluating."""

from __future__ import annotations

import pytest

from runs.service.policies.match import ConditionError, matches, parse_condition


@pytest.mark.parametrize(
    ("condition", "arguments", "expected"),
    [
        ("", {"anything": 1}, True),
        ("database=sample", {"database": "sample", "query": "x"}, True),
        ("database=sample", {"database": "live"}, False),
        ("database=sample", {}, False),  # a missing argument matches no clause
        ("database!=live", {}, False),
        ("database!=live", {"database": "sample"}, True),
        ("limit=10", {"limit": 10}, True),
        ("limit=10", {"limit": "10"}, True),
        ("dry_run=true", {"dry_run": True}, True),
        ("dry_run=true", {"dry_run": "yes"}, False),
        ("filters.region=north", {"filters": {"region": "north"}}, True),
        ("items.1=b", {"items": ["a", "b"]}, True),
        ("items.5=b", {"items": ["a", "b"]}, False),
        (
            "filters=north",
            {"filters": {"region": "north"}},
            False,
        ),  # objects never equal text
        ("a=2 and b=3", {"a": 2, "b": 3}, True),
        ("a=2 and b=3", {"a": 2, "b": 4}, False),
        ("q=__import__('os')", {"q": "__import__('os')"}, True),  # text, not code
    ],
)
def test_a_condition_matches_exactly_the_calls_it_names(
    condition: str, arguments: dict[str, object], expected: bool
) -> None:
    assert matches(parse_condition(condition), arguments) is expected


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        ("database", "not a clause"),
        ("=sample", "not a clause"),
        ("data base=x", "not a path"),
        ("a[0]=x", "not a path"),
        (" and ".join(f"k{i}=v" for i in range(9)), "at most 8 clauses"),
        ("x=" + "v" * 600, "at most 500 characters"),
        (".".join("k" * 9) + "=v", "at most 8 parts"),
    ],
)
def test_a_malformed_condition_is_refused_with_what_is_wrong(
    condition: str, problem: str
) -> None:
    with pytest.raises(ConditionError, match=problem):
        parse_condition(condition)
