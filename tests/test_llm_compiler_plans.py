"""LLMCompiler without HTTP: plan parsing, references, substitution, validation, the joiner's reply,
dependency-driven execution, and all 190 NESTFUL plans run through the parser and the executor."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import create_model

from runs.engine import (
    FunctionTool,
    Task,
    TaskStep,
    ToolCall,
    ToolCallResult,
    ToolMetadata,
)
from runs.engine.events import AgentEvent
from runs.engine.tools import ToolOutput
from runs.engine.workers.llm_compiler import (
    PlanExecutor,
    PlanParser,
    find_references,
    parse_joiner_reply,
    parse_plan,
    substitute,
)
from runs.engine.workers.llm_compiler.plan import PlannedCall

NESTFUL = Path(__file__).resolve().parent / "data" / "nestful-plans.json"
PARAMS = {
    "search": ["query"],
    "divide": ["a", "b"],
    "compose": ["text", "extra"],
    "lookup": ["key"],
}


def out(content: str, raw: Any = None, error: bool = False) -> ToolOutput:
    return ToolOutput(content=content, tool_name="t", raw_output=raw, is_error=error)


# --- parsing ---------------------------------------------------------------------------------------


def test_the_issue_example_parses_into_calls_with_dependencies() -> None:
    plan = parse_plan(
        'Thought: two lookups\n1. search("Lagos population")\n2. search("Cairo population")\n'
        '3. divide("$1", "$2")\nThought: I can answer now.\n4. join()<END_OF_PLAN>',
        PARAMS,
    )
    assert [(c.index, c.tool_name, c.kwargs, c.depends_on) for c in plan.calls] == [
        (1, "search", {"query": "Lagos population"}, []),
        (2, "search", {"query": "Cairo population"}, []),
        (3, "divide", {"a": "$1", "b": "$2"}, [1, 2]),
    ]
    assert plan.calls[0].thought == "two lookups"
    assert plan.joined and plan.problems == []
    assert all(c.error is None for c in plan.calls)


def test_bare_braced_keyword_and_json_style_arguments() -> None:
    plan = parse_plan(
        '1. search(query="a")\n2. compose($1, extra=${1})\n3. lookup({"k": [1, -2.5, true, null, None], "r": $2})\n'
        "4. compose('single \\'quoted\\' $2', extra=[\"${2}\"])\n5. join()",
        PARAMS,
    )
    calls = {c.index: c for c in plan.calls}
    assert calls[2].kwargs == {"text": "$1", "extra": "$1"} and calls[2].depends_on == [
        1
    ]
    assert calls[3].kwargs == {"key": {"k": [1, -2.5, True, None, None], "r": "$2"}}
    assert calls[3].depends_on == [2]
    assert calls[4].kwargs == {"text": "single 'quoted' $2", "extra": ["${2}"]}
    assert calls[4].depends_on == [2]
    assert plan.problems == []


def test_a_call_may_span_lines_until_its_parenthesis_closes() -> None:
    plan = parse_plan('1. lookup({\n  "a": 1,\n  "b": "x)"\n})\n2. join()', PARAMS)
    assert (
        plan.calls[0].kwargs == {"key": {"a": 1, "b": "x)"}}
        and plan.calls[0].error is None
    )


def test_dollar_amounts_inside_text_are_not_references() -> None:
    plan = parse_plan(
        '1. search("laptops $100-$200")\n2. compose("costs $1 or $5", "$1")\n3. join()',
        PARAMS,
    )
    assert plan.calls[0].depends_on == [] and plan.calls[0].error is None
    # $1 is an earlier call; $5 is not, and bare inside text it stays text
    assert plan.calls[1].depends_on == [1] and plan.calls[1].error is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('1. search("$2")\n2. search("x")\n3. join()', "not an earlier call"),
        ('1. search("x")\n5. search($3)\n6. join()', "no such call"),
        ('1. search("x")\n2. search("${2}")\n3. join()', "not an earlier call"),
        ("1. divide(1, 2, 3)\n2. join()", "at most 2 positional"),
        ("1. search(query=some words)\n2. join()", "not valid"),
        ("1. search(len('x'))\n2. join()", "cannot read the argument"),
        ("1. search(query='a', query='b')\n2. join()", "given twice"),
        ("1. totally not a call\n2. join()", "expected tool(arguments)"),
        ('1. search("never closed"\n', "not closed"),
        ("1. search(" + "[" * 150 + "]" * 150 + ")\n2. join()", "more than 100 levels"),
    ],
)
def test_bad_calls_carry_an_error_and_do_not_raise(text: str, fragment: str) -> None:
    plan = parse_plan(text, PARAMS)
    errors = [c.error for c in plan.calls if c.error]
    assert errors and fragment in errors[0], (errors, plan.problems)


def test_plan_level_problems_missing_join_cycle_duplicates() -> None:
    assert (
        "does not end with join()" in parse_plan('1. search("x")', PARAMS).problems[0]
    )
    assert "no plan" in parse_plan("I think the answer is 4.", PARAMS).problems[0]
    cycle = parse_plan('1. search("$2")\n2. search("$1")\n3. join()', PARAMS)
    assert any("1 -> 2 -> 1" in p and "cycle" in p for p in cycle.problems)
    assert cycle.calls[0].error and cycle.calls[1].depends_on == [1]
    dup = parse_plan('1. search("a")\n1. search("b")\n2. join()', PARAMS)
    assert len(dup.calls) == 1 and "used twice" in dup.problems[0]
    after = parse_plan('1. search("a")\n2. join()\n3. search("b")', PARAMS)
    assert len(after.calls) == 1 and "after join()" in after.problems[0]


def test_unknown_tool_keeps_its_arguments_and_runs_into_an_error_later() -> None:
    plan = parse_plan('1. teleport("Mars", 3)\n2. join()', PARAMS)
    assert plan.calls[0].tool_name == "teleport" and plan.calls[0].kwargs == {
        "arg1": "Mars",
        "arg2": 3,
    }


def test_text_after_the_stop_marker_is_ignored() -> None:
    plan = parse_plan(
        '1. search("a")\n2. join()<END_OF_PLAN>\n3. search("b")\nmore chatter', PARAMS
    )
    assert [c.index for c in plan.calls] == [1] and plan.problems == []


def test_each_call_is_returned_as_soon_as_its_line_is_complete() -> None:
    parser = PlanParser(PARAMS)
    text = 'Thought: go\n1. search("a")\n2. search("b")\n3. join()'
    seen: list[tuple[int, list[int]]] = []  # (characters fed, indices returned)
    for position, char in enumerate(text, start=1):
        ready = parser.feed(char)
        if ready:
            seen.append((position, [c.index for c in ready]))
    assert seen == [(text.index("\n2.") + 1, [1]), (text.index("\n3.") + 1, [2])]
    assert parser.close() == [] and parser.joined


def test_a_replan_continues_numbering_and_may_use_earlier_results() -> None:
    plan = parse_plan(
        '4. compose("$2 and $4")\n5. search("$3")\n6. join()',
        PARAMS,
        first_index=4,
        earlier=[1, 2, 3],
    )
    assert [(c.index, c.depends_on) for c in plan.calls] == [(4, [2]), (5, [3])]
    assert (
        plan.calls[0].error is None
    )  # "$4" inside text is not an earlier call: literal


def test_a_replanner_that_restarts_at_one_is_shifted_past_earlier_calls() -> None:
    plan = parse_plan(
        '1. search("x")\n2. compose("$1", "${1} costs $100")\n3. join()',
        PARAMS,
        first_index=4,
        earlier=[1, 2, 3],
    )
    assert [(c.index, c.depends_on) for c in plan.calls] == [(4, []), (5, [4])]
    assert plan.calls[1].kwargs == {"text": "$4", "extra": "${4} costs $100"}


# --- references and substitution ------------------------------------------------------------------------


def test_substitution_keeps_types_for_whole_arguments_and_formats_inside_text() -> None:
    results = {
        1: out("15", raw=15),
        2: out('["a", "b"]', raw=["a", "b"]),
        10: out("ten", raw="ten"),
    }
    kwargs = {
        "n": "$1",
        "items": "${2}",
        "text": "$1 people and $10 and ${2}!",
        "nested": {"x": ["$1"]},
        "k": 3,
    }
    assert substitute(kwargs, results, {1, 2, 10}) == {
        "n": 15,
        "items": ["a", "b"],
        "text": '15 people and ten and ["a", "b"]!',
        "nested": {"x": [15]},
        "k": 3,
    }


def test_one_never_touches_ten() -> None:
    results = {1: out("ONE", raw="ONE"), 10: out("TEN", raw="TEN")}
    assert substitute("$10|$1|${1}0|$1$10", results, {1, 10}) == "TEN|ONE|ONE0|ONETEN"
    assert substitute("$10 and $1", {1: out("ONE")}, {1}) == "$10 and ONE"


def test_references_only_count_earlier_calls() -> None:
    refs = find_references(
        {"a": "$1", "b": "price $100", "c": ["${3}"]}, own_index=3, known={1, 2}
    )
    assert refs.depends_on == {1} and refs.later == {3} and refs.missing == set()


# --- the joiner's reply ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "replan", "payload", "thought"),
    [
        ("Thought: easy\nAction: Finish(42)", False, "42", "easy"),
        (
            "Thought: t\nAction: Finish(The ratio is 1.5 (Lagos/Cairo), roughly.)",
            False,
            "The ratio is 1.5 (Lagos/Cairo), roughly.",
            "t",
        ),
        (
            "Thought: need more\nAction: Replan(call 2 failed (timeout))",
            True,
            "call 2 failed (timeout)",
            "need more",
        ),
        ("Thought: t\nAction: Finish[f(x) = 3]", False, "f(x) = 3", "t"),
        (
            "Thought: t\naction: finish(multi\nline (answer))\n",
            False,
            "multi\nline (answer)",
            "t",
        ),
        ("Thought: t\nAction: Finish(cut off mid", False, "cut off mid", "t"),
        (
            "Thought: t\nAction: Finish(first)\nThought: again\nAction: Finish(second)",
            False,
            "first",
            "t",
        ),
        (
            "Just the answer, no format (really).",
            False,
            "Just the answer, no format (really).",
            "Just the answer, no format (really).",
        ),
        ("Thought: a\nb\nFinish(ok) trailing.", False, "ok", "a\nb"),
    ],
)
def test_joiner_replies_parse_robustly(
    reply: str, replan: bool, payload: str, thought: str
) -> None:
    decision = parse_joiner_reply(reply)
    assert decision.replan is replan
    assert (decision.reason if replan else decision.answer) == payload
    assert decision.thought == thought


# --- the executor --------------------------------------------------------------------------------------


class Events:
    def __init__(self) -> None:
        self.items: list[AgentEvent] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.items.append(event)

    def results(self) -> dict[int, ToolCallResult]:
        return {
            e.plan_index: e
            for e in self.items
            if isinstance(e, ToolCallResult) and e.plan_index is not None
        }


def task_and_step(events: Events) -> tuple[Task, TaskStep]:
    task = Task(input="q")
    task.set_event_sink(events)
    return task, TaskStep(task_id=task.task_id)


def sleeper_tools() -> list[FunctionTool]:
    async def fast(x: str) -> str:
        """Takes 0.1 s."""
        await asyncio.sleep(0.1)
        return f"fast({x})"

    async def slow(x: str) -> str:
        """Takes 0.5 s."""
        await asyncio.sleep(0.5)
        return f"slow({x})"

    def boom(x: str) -> str:
        """Always fails."""
        raise RuntimeError(f"boom {x}")

    return [
        FunctionTool.from_defaults(fast),
        FunctionTool.from_defaults(slow),
        FunctionTool.from_defaults(boom),
    ]


async def run_plan(
    text: str, tools: list[FunctionTool], events: Events
) -> dict[int, ToolOutput]:
    task, step = task_and_step(events)
    by_name = {t.metadata.name: t for t in tools}
    parser = PlanParser(
        {
            name: list(t.metadata.parameters_schema()["properties"])
            for name, t in by_name.items()
        }
    )
    executor = PlanExecutor(task, step, by_name)
    for line in text.splitlines(keepends=True):
        for call in parser.feed(line):
            executor.submit(call)
    for call in parser.close():
        executor.submit(call)
    return await executor.wait()


async def test_a_chain_of_fast_calls_does_not_wait_for_an_unrelated_slow_call() -> None:
    events = Events()
    outputs = await run_plan(
        '1. slow("s")\n2. fast("a")\n3. fast("$2")\n4. fast("$3")\n5. fast("$1 + $4")\n6. join()',
        sleeper_tools(),
        events,
    )
    results = events.results()
    # wave-by-wave would start 3 only when the slow call 1 is done (0.5 s); here the chain
    # 2 -> 3 -> 4 (0.3 s) runs, and ends, while 1 is still running
    assert results[3].started_at < results[1].ended_at
    assert results[4].ended_at < results[1].ended_at
    assert results[5].started_at >= results[1].ended_at
    assert outputs[5].content == "fast(slow(s) + fast(fast(fast(a))))"


async def test_a_failing_call_is_an_observation_and_its_dependants_get_the_error() -> (
    None
):
    events = Events()
    outputs = await run_plan(
        '1. boom("x")\n2. fast("$1")\n3. fast("${2}!")\n4. fast("free")\n5. join()',
        sleeper_tools(),
        events,
    )
    assert outputs[1].is_error and "RuntimeError: boom x" in outputs[1].content
    assert (
        outputs[2].is_error
        and "not run because call 1 (boom) failed" in outputs[2].content
    )
    assert outputs[3].is_error and "call 2" in outputs[3].content
    assert not outputs[4].is_error
    # every call, run or not, shows up as ToolCall then ToolCallResult with its place in the DAG
    calls = {e.plan_index: e for e in events.items if isinstance(e, ToolCall)}
    assert calls[3].depends_on == [2] and set(calls) == {1, 2, 3, 4}


async def test_bad_calls_and_unknown_tools_resolve_without_hanging() -> None:
    events = Events()
    outputs = await asyncio.wait_for(
        run_plan(
            '1. nope("x")\n2. fast("$1")\n3. fast("$9")\n4. fast(unparseable words)\n5. fast("$4")',
            sleeper_tools(),
            events,
        ),
        timeout=3,
    )
    assert "no tool named 'nope'" in outputs[1].content
    assert all(outputs[i].is_error for i in (1, 2, 3, 4, 5))


async def test_an_exception_in_a_call_fails_the_wait_instead_of_hanging() -> None:
    events = Events()
    task, step = task_and_step(events)

    async def broken_sink(event: AgentEvent) -> None:
        if isinstance(event, ToolCall) and event.plan_index == 1:
            raise RuntimeError("sink down")

    task.set_event_sink(broken_sink)
    tools = {t.metadata.name: t for t in sleeper_tools()}
    executor = PlanExecutor(task, step, tools)
    parser = PlanParser({"fast": ["x"], "slow": ["x"]})
    for call in parser.feed('1. fast("a")\n2. fast("$1")\n3. slow("b")\n'):
        executor.submit(call)
    with pytest.raises(RuntimeError, match="sink down"):
        await asyncio.wait_for(executor.wait(), timeout=2)


# --- NESTFUL: 190 real dependent plans ---------------------------------------------------------------------


def _render(value: Any, style: int) -> str:
    if isinstance(value, str) and re.fullmatch(r"\$\d+", value) and style % 3 == 1:
        return value  # a bare reference
    if isinstance(value, str) and re.fullmatch(r"\$\d+", value) and style % 3 == 2:
        return json.dumps("${" + value[1:] + "}")
    return repr(value) if style % 2 else json.dumps(value)


def render_plan(item: dict[str, Any], style: int) -> str:
    lines = [f"Thought: {item['question'][:60]}"]
    for call in item["calls"]:
        params = item["tools"][call["tool"]]
        args = [_render(a, style + i) for i, a in enumerate(call["args"])]
        if style % 4 == 3:  # by name
            args = [f"{name}={a}" for name, a in zip(params, args)]
        lines.append(f"{call['n']}. {call['tool']}({', '.join(args)})")
    lines.append(f"{len(item['calls']) + 1}. join()<END_OF_PLAN>")
    return "\n".join(lines)


def _expected(value: Any, deps: set[int], results: dict[int, ToolOutput]) -> Any:
    """What the tool must receive, computed independently of the engine's substitute()."""
    if isinstance(value, str):
        whole = re.fullmatch(r"\$(\d+)", value)
        if whole:
            return results[int(whole.group(1))].raw_output
        return re.sub(
            r"\$(\d+)(?!\d)",
            lambda m: (
                results[int(m.group(1))].content
                if int(m.group(1)) in deps
                else m.group(0)
            ),
            value,
        )
    if isinstance(value, list):
        return [_expected(v, deps, results) for v in value]
    if isinstance(value, dict):
        return {k: _expected(v, deps, results) for k, v in value.items()}
    return value


def nestful_tools(
    item: dict[str, Any], log: list[tuple[str, dict[str, Any]]]
) -> list[FunctionTool]:
    tools = []
    for name, params in item["tools"].items():

        async def run(_name: str = name, **kwargs: Any) -> dict[str, Any]:
            log.append((_name, kwargs))
            await asyncio.sleep(
                0.001 * (len(log) % 3)
            )  # uneven, so finishing order varies
            return {"tool": _name, "nth": len(log)}

        schema = create_model(name, **{p: (Any, None) for p in params})  # type: ignore[call-overload]
        tools.append(
            FunctionTool(
                ToolMetadata(name=name, description=name, fn_schema=schema),
                async_fn=run,
            )
        )
    return tools


async def run_nestful(item: dict[str, Any], style: int) -> None:
    log: list[tuple[str, dict[str, Any]]] = []
    events = Events()
    task, step = task_and_step(events)
    tools = {t.metadata.name: t for t in nestful_tools(item, log)}
    parser = PlanParser(item["tools"])
    executor = PlanExecutor(task, step, tools)
    text = render_plan(item, style)
    for start in range(
        0, len(text), 7
    ):  # streamed in small pieces, dispatched as lines complete
        for call in parser.feed(text[start : start + 7]):
            executor.submit(call)
        await asyncio.sleep(0)
    for call in parser.close():
        executor.submit(call)
    outputs = await executor.wait()
    assert parser.problems == [] and parser.joined, (item["id"], parser.problems)
    assert len(log) == len(item["calls"]) == len(outputs), item[
        "id"
    ]  # every call ran exactly once
    results = events.results()
    started = [e for e in events.items if isinstance(e, ToolCall)]
    assert sorted(e.plan_index or 0 for e in started) == [c["n"] for c in item["calls"]]
    for call in item["calls"]:
        n, deps = call["n"], set(call["deps"])
        planned: PlannedCall = next(c for c in parser.calls if c.index == n)
        assert set(planned.depends_on) == deps, (item["id"], n)
        assert not outputs[n].is_error, (item["id"], n, outputs[n].content)
        for dep in deps:
            assert results[n].started_at >= results[dep].ended_at, (item["id"], n, dep)
        params = item["tools"][call["tool"]]
        expected = {
            p: _expected(a, deps, outputs) for p, a in zip(params, call["args"])
        }
        assert results[n].tool_kwargs == expected, (item["id"], n)


async def test_all_nestful_plans_run_every_call_once_after_its_dependencies() -> None:
    items = json.loads(NESTFUL.read_text())
    assert len(items) == 190
    for number, item in enumerate(items):
        await run_nestful(item, style=number)
