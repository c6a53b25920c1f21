"""Shared pieces for engine tests: arithmetic tools, the seed's script, an LLM pointed at a server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from runs.engine import AgentRunner, FunctionCallingAgentWorker, FunctionTool, OpenAI
from runs.engine.events import AgentEvent
from runs.engine.llms.openai import DEFAULT_TRANSPORT, Transport
from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

SEED_QUESTION = "What is (121 * 3) + 42?"


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def arithmetic_tools() -> list[FunctionTool]:
    return [FunctionTool.from_defaults(multiply), FunctionTool.from_defaults(add)]


def seed_rules() -> list[Rule]:
    """multiply(121, 3), then add(363, 42), then the answer: the seed's usage pattern."""
    return [
        Rule(
            name="multiply",
            match=Match(tool_results_since_user=0, has_tools=True),
            reply=Reply(
                tool_calls=[ToolCallSpec(name="multiply", arguments={"a": 121, "b": 3})]
            ),
        ),
        Rule(
            name="add",
            match=Match(tool_results_since_user=1),
            reply=Reply(
                tool_calls=[ToolCallSpec(name="add", arguments={"a": 363, "b": 42})]
            ),
        ),
        Rule(
            name="answer",
            match=Match(tool_results_since_user=2),
            reply=Reply(text="(121 * 3) + 42 = 405"),
        ),
    ]


def llm_for(
    server: ScriptedServer,
    max_retries: int = 0,
    timeout: float = 10.0,
    transport: Transport = DEFAULT_TRANSPORT,
) -> OpenAI:
    return OpenAI(
        model="scripted",
        api_base=server.base_url,
        api_key="sk-test",
        max_retries=max_retries,
        timeout=timeout,
        transport=transport,
    )


@contextmanager
def serving(*rules: Rule, **script_kwargs: object) -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(rules=list(rules), **script_kwargs)) as server:  # type: ignore[arg-type]
        yield server


class Recorder:
    """Collects every event a runner emits."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, type_: str) -> list[AgentEvent]:
        return [e for e in self.events if e.type == type_]


def make_agent(
    server: ScriptedServer,
    tools: list[FunctionTool] | None = None,
    **runner_kwargs: object,
) -> tuple[AgentRunner, Recorder]:
    recorder = Recorder()
    worker = FunctionCallingAgentWorker.from_tools(
        tools if tools is not None else arithmetic_tools(), llm=llm_for(server)
    )
    return AgentRunner(worker, on_event=recorder, **runner_kwargs), recorder  # type: ignore[arg-type]


def run_in_new_loop(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]
