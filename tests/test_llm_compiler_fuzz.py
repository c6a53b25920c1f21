"""Malformed plans never raise: whatever a planner writes, streamed in any chunks, every bad line is
an observation (a call carrying its error, or a problem of the plan) and the executor answers
every call it was given."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from engine_helpers import llm_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.engine import FunctionTool, LLMCompilerAgentWorker, Task, TaskStep
from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer
from runs.engine.tools import ToolOutput
from runs.engine.workers.llm_compiler import PlanExecutor, PlanParser


def echo(x: str) -> str:
    """Return the text."""
    return x


def pair(a: str, b: str) -> str:
    """Join two texts."""
    return f"{a}+{b}"


TOOLS = {
    t.metadata.name: t
    for t in (FunctionTool.from_defaults(echo), FunctionTool.from_defaults(pair))
}
PARAMS = {
    name: list(t.metadata.parameters_schema()["properties"])
    for name, t in TOOLS.items()
}


async def run_plan(
    chunks: list[str], earlier: dict[int, ToolOutput] | None = None
) -> tuple[PlanParser, dict[int, ToolOutput]]:
    """Feed the chunks as a stream, submit each call as it is ready, and wait for all of them."""
    task = Task(input="q")
    step = TaskStep(task_id=task.task_id)
    first = max(earlier or {}, default=0) + 1
    parser = PlanParser(PARAMS, first_index=first, earlier=set(earlier or {}))
    executor = PlanExecutor(task, step, TOOLS, earlier)
    for chunk in chunks:
        for call in parser.feed(chunk):
            executor.submit(call)
    for call in parser.close():
        executor.submit(call)
    outputs = await asyncio.wait_for(executor.wait(), timeout=10)
    return parser, outputs


def check(parser: PlanParser, outputs: dict[int, ToolOutput]) -> None:
    indices = [call.index for call in parser.calls]
    assert len(indices) == len(set(indices)), indices  # one call per number
    assert set(outputs) == set(indices)  # every call was answered
    for call in parser.calls:
        if call.error is not None:
            assert outputs[call.index].is_error


# --- the cases the review found ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "plan",
    [
        '1. echo("a")\n1. this line cannot be read\n2. join()',  # a repeated number on an unreadable line
        '1. echo("a")\n1. echo("never closed"\n',  # ... on a line left open at the end
        '1. this line cannot be read\n1. echo("a")\n2. join()',
        '1. echo("never closed"\n1. echo("b")\n2. join()',  # the open line swallows the next one
        '2. echo("a")\n1. nonsense\n3. join()',  # a lower number on an unreadable line
        '2. echo("a")\n1. echo("open"\n',
    ],
)
async def test_a_repeated_or_out_of_order_number_is_a_problem_not_a_crash(
    plan: str,
) -> None:
    parser, outputs = await run_plan([plan])
    check(parser, outputs)
    assert parser.problems or any(call.error for call in parser.calls)


async def test_a_replan_reusing_an_earlier_number_on_an_unreadable_line_is_a_problem() -> (
    None
):
    earlier = {1: ToolOutput(content="a", tool_name="echo", raw_output="a")}
    for plan in (
        '2. echo("$1")\n2. ???\n3. join()',
        '2. echo("$1")\n2. echo("open"\n',
        "1. ???\n2. join()",
    ):
        parser, outputs = await run_plan([plan], earlier)
        check(parser, outputs)


def test_the_worker_runs_such_a_plan_and_the_joiner_sees_the_problem() -> None:
    plan = '1. echo("a")\n1. this line cannot be read\n1. echo("open"\n'
    script = Script(
        rules=[
            Rule(
                match=Match(system_contains="utmost parallelizability"),
                reply=Reply(text=plan),
            ),
            Rule(
                match=Match(last_user_contains="Solve a question answering task"),
                reply=Reply(text="Action: Finish(a)"),
            ),
        ]
    )
    with ScriptedServer(script) as server:
        agent = LLMCompilerAgentWorker.from_tools(
            list(TOOLS.values()), llm=llm_for(server)
        ).as_agent()
        assert agent.chat("q").response == "a"
        joiner_prompt = server.requests[1].last_user_text
    assert "call number 1 is used twice" in joiner_prompt


# --- fuzz -------------------------------------------------------------------------------------------

NUMBERS = st.integers(min_value=0, max_value=4)
NAMES = st.sampled_from(["echo", "pair", "join", "nope", "", "1", "echo.x"])
ARGS = st.lists(
    st.sampled_from(
        [
            '"x"',
            "$1",
            '"$2"',
            "${3}",
            "1",
            "[1, 2",
            "x y",
            "'",
            '"""',
            "(",
            ")",
            "{",
            "}",
            "q=",
            'b="c"',
            "$9",
            "-",
            "**{}",
            "*[1]",
            "a=$2",
            "$0",
            "${",
            "\\",
            "None",
            '"$1 and $2"',
            ",",
            "=",
            "$$1",
        ]
    ),
    max_size=4,
)
NUMBERED = st.builds(
    lambda n, sep, name, args, close: f"{n}{sep} {name}({', '.join(args)}{close}",
    NUMBERS,
    st.sampled_from([".", ")", ":", "", " ."]),
    NAMES,
    ARGS,
    st.sampled_from([")", "", "))", ") trailing words", ")<END_OF_PLAN>"]),
)
LINES = st.one_of(
    NUMBERED,
    st.builds(lambda n: f"{n}. just words", NUMBERS),
    st.sampled_from(
        [
            "Thought: hmm",
            "join()",
            "<END_OF_PLAN>",
            "",
            "echo('unnumbered')",
            "- 1. echo('x')",
            "Thought:",
        ]
    ),
    st.text(alphabet='1234.()"$ joinech\n', max_size=16),
)


@st.composite
def streamed_plans(draw: st.DrawFn) -> list[str]:
    text = "\n".join(draw(st.lists(LINES, max_size=8)))
    cuts = sorted(
        draw(
            st.sets(
                st.integers(min_value=1, max_value=max(len(text) - 1, 1)), max_size=6
            )
        )
    )
    points = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(chunks=streamed_plans(), replan=st.booleans())
def test_any_plan_streamed_in_any_chunks_is_answered_without_an_exception(
    chunks: list[str], replan: bool
) -> None:
    earlier = (
        {1: ToolOutput(content="a", tool_name="echo", raw_output="a")}
        if replan
        else None
    )
    parser, outputs = asyncio.run(run_plan(chunks, earlier))
    check(parser, outputs)
