"""Tool arguments checked against untrusted JSON schemas (an MCP server's) in bounded time.

The repro of issue 44: an input schema with a backtracking `pattern` (`^(a+)+$`, or the
`^([a-z0-9]+[-.]?)+$` ordinary servers ship) and `"a" * 28 + "!"` from the model held the
event loop for 12 s under Python's `re`. The guard: the loop's lag stays under 100 ms while
such an argument is checked (a ticker task measures it), and the call is refused with the
reason, its tool never run.
"""

from __future__ import annotations

from typing import Any

import pytest

from runs.engine.schema_check import (
    CHECK_BUDGET,
    SafeSchema,
    SchemaRefused,
    as_re2,
)
from runs.engine.schema_tool import SchemaTool
from runs.engine.tools import ToolOutput
from tests.loop_lag import max_lag_while

HOSTILE = "a" * 28 + "!"
LAG_LIMIT_S = 0.1


def recording_tool(
    parameters: dict[str, Any],
) -> tuple[SchemaTool, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    async def call(arguments: dict[str, Any]) -> ToolOutput:
        calls.append(arguments)
        return ToolOutput(content="ran", tool_name="")

    return SchemaTool("srv__lookup", "Look up a name.", parameters, call), calls


def _string_with(pattern: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": pattern}},
        "required": ["name"],
    }


@pytest.mark.parametrize("pattern", [r"^(a+)+$", r"^([a-z0-9]+[-.]?)+$"])
async def test_a_backtracking_pattern_does_not_hold_the_event_loop(
    pattern: str,
) -> None:
    tool, calls = recording_tool(_string_with(pattern))
    output, lag = await max_lag_while(tool.acall(name=HOSTILE))
    assert lag < LAG_LIMIT_S, f"the event loop was held {lag:.2f} s"
    assert output.is_error and calls == []
    assert f"name: {HOSTILE!r} does not match {pattern!r}" in output.content
    fine, _ = await max_lag_while(tool.acall(name="a" * 28))
    assert (fine.is_error, fine.content, calls) == (False, "ran", [{"name": "a" * 28}])


async def test_a_backtracking_pattern_property_does_not_hold_the_event_loop() -> None:
    patterns = r"^([a-z0-9]+[-.]?)+$"
    tool, calls = recording_tool(
        {
            "type": "object",
            "patternProperties": {patterns: {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    output, lag = await max_lag_while(tool.acall(**{HOSTILE: 1, "ok-name": 2}))
    assert lag < LAG_LIMIT_S, f"the event loop was held {lag:.2f} s"
    assert output.is_error and calls == []
    assert f"({HOSTILE!r} was unexpected)" in output.content
    assert tool.problems({"ok-name": "two"}) == [
        ("ok-name", "'two' is not of type 'integer'")
    ]
    assert tool.problems({"a.b-c": 3}) == []


async def test_a_long_text_against_a_large_pattern_is_refused_within_the_budget() -> (
    None
):
    # linear in the text, but its length times a 2,000-step program is 200 million steps:
    # Python's re took seconds on this; RE2 would too, so the check says it will not
    pattern = "^[a-z]{0,999}z"
    tool, calls = recording_tool(_string_with(pattern))
    text = "a" * 100_000
    output, lag = await max_lag_while(tool.acall(name=text))
    assert lag < LAG_LIMIT_S, f"the event loop was held {lag:.2f} s"
    assert output.is_error and calls == []
    assert "is too long to check against '^[a-z]{0,999}z'" in output.content
    assert f"{CHECK_BUDGET:,} text bytes × pattern steps" in output.content
    assert len(output.content) < 1000  # the 100,000 characters are not quoted back
    assert not (await tool.acall(name="abz")).is_error


async def test_many_checks_share_one_budget() -> None:
    tool, calls = recording_tool(
        {
            "type": "object",
            "properties": {
                "names": {
                    "type": "array",
                    "items": {"type": "string", "pattern": "^[a-z]{0,999}z"},
                }
            },
        }
    )
    # each text alone fits the budget (2,000 bytes × 2,003 steps); 1,000 of them do not
    text = "z" + "a" * 2000
    output, lag = await max_lag_while(tool.acall(names=[text] * 1000))
    assert lag < LAG_LIMIT_S, f"the event loop was held {lag:.2f} s"
    assert output.is_error and calls == [] and "is too long to check" in output.content
    assert tool.problems({"names": [text] * 3}) == []


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        (_string_with(r"^(\w)\1$"), r"'^(\\w)\\1$', which cannot be checked safely"),
        (_string_with(r"^(?=.*\d).{8,}$"), "invalid perl operator: (?="),
        (_string_with(r"(?<!x)y"), "backreferences and lookarounds are not supported"),
        (
            {"type": "object", "patternProperties": {r"^(?!x)": {}}},
            "cannot be checked safely",
        ),
        (_string_with(r"\p{L}{0,300}"), "steps, over 20,000"),
        (_string_with("a" * 2001), "over 2,000 characters"),
        (
            {
                "type": "object",
                "patternProperties": {"^x": {}},
                "unevaluatedProperties": False,
            },
            "combines unevaluatedProperties with patternProperties",
        ),
        ({"type": "object", "properties": 3}, "is invalid (3 is not of type 'object')"),
    ],
)
def test_schemas_that_cannot_be_checked_safely_are_refused_naming_the_tool(
    schema: dict[str, Any], said: str
) -> None:
    with pytest.raises(
        SchemaRefused, match="^(has the pattern|combines|is invalid)"
    ) as caught:
        SafeSchema(schema)
    assert said in str(caught.value)
    with pytest.raises(
        ValueError, match="^the tool 'srv__lookup': its input schema "
    ) as named:
        recording_tool(schema)
    assert said in str(named.value)


def test_ecma_patterns_that_re2_reads_are_taken_and_match_as_json_schema_says() -> None:
    # Python's re refused \p{L} (so such a schema was left out); \u escapes are ECMA-262's
    tool, _ = recording_tool(_string_with(r"^\p{L}+ \u00e9\uD83D\uDE00$"))
    assert tool.problems({"name": "Zoë é😀"}) == []
    assert tool.problems({"name": "Zoë1 é😀"}) != []
    # an escaped backslash is kept, and the u after it is a letter
    assert as_re2(r"\\u0041\u0041") == r"\\u0041\x{41}"
    # `$` is the end of the text, not before a final newline as in Python's re
    anchored, _ = recording_tool(_string_with("^abc$"))
    assert anchored.problems({"name": "abc\n"}) == [
        ("name", "'abc\\n' does not match '^abc$'")
    ]


def test_patterns_in_data_are_not_taken_for_keywords() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "default": "(a)\\1"},
            "spec": {"type": "object", "examples": [{"pattern": "(?=x)"}]},
        },
    }
    tool, _ = recording_tool(schema)
    assert tool.problems({"pattern": "(a)\\1", "spec": {}}) == []


def test_older_drafts_use_re2_too() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^x-": {"type": "boolean"}},
        "additionalProperties": False,
    }
    checked = SafeSchema(schema)
    assert [e.message for e in checked.errors({"name": HOSTILE})] == [
        f"{HOSTILE!r} does not match '^(a+)+$'"
    ]
    assert [e.message for e in checked.errors({"x-on": "yes", "other": 1})] == [
        "'yes' is not of type 'boolean'",
        "Additional properties are not allowed ('other' was unexpected)",
    ]
