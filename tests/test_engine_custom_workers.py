"""CustomSimpleAgentWorker and FnAgentWorker under AgentRunner: the docs' example, async paths, undo."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import Recorder, arithmetic_tools, llm_for, serving

from runs.engine import (
    AgentChatResponse,
    AgentRunner,
    ChatMessage,
    CustomSimpleAgentWorker,
    FnAgentWorker,
    OpenAI,
    Task,
)
from runs.engine.testing import Match, Reply, Rule

DOCS = Path(__file__).resolve().parents[1] / "docs" / "engine.md"


def docs_example(name: str) -> str:
    """The python block that follows ``<!-- example: name -->`` in docs/engine.md."""
    found = re.search(
        rf"<!-- example: {name} .*?-->\n```python\n(.*?)```",
        DOCS.read_text(encoding="utf-8"),
        re.DOTALL,
    )
    assert found, f"docs/engine.md has no example {name!r}"
    return found.group(1)


SPIDER_RULES = [
    Rule(
        name="number",
        match=Match(last_user_contains="Please answer with a number."),
        reply=Reply(text="Eight: 8."),
    ),
    Rule(
        name="vague",
        match=Match(last_user_contains="spider"),
        reply=Reply(text="Quite a few."),
    ),
]


def test_the_documented_custom_worker_runs_and_undoes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(*SPIDER_RULES) as server:
        namespace: dict[str, Any] = {"llm": llm_for(server)}
        exec(compile(docs_example("custom-worker"), str(DOCS), "exec"), namespace)  # noqa: S102 - the docs example is the test
        assert str(namespace["response"]) == "Eight: 8."
        assert capsys.readouterr().out.strip() == "answered after 2 tries"
        assert [r.rule_name for r in server.requests] == ["vague", "number"]
        agent: AgentRunner = namespace["agent"]
        # the worker's messages joined the agent's memory when the task was finalized
        assert [m.content for m in agent.chat_history] == [
            "How many legs does a spider have?",
            "Quite a few.",
            "Please answer with a number.",
            "Eight: 8.",
        ]

        # step by step, with events and undo
        recorder = Recorder()
        stepwise = AgentRunner(
            namespace["NumberAnswerWorker"].from_tools(llm=llm_for(server)),
            on_event=recorder,
        )
        task = stepwise.create_task("How many legs does a spider have?")
        first = stepwise.run_step(task.task_id)
        assert not first.is_last and first.output.response == "Quite a few."
        state_before = stepwise.get_task_state(task.task_id).model_dump(mode="json")
        assert stepwise.run_step(task.task_id).is_last
        stepwise.undo_step(task.task_id)
        assert (
            stepwise.get_task_state(task.task_id).model_dump(mode="json")
            == state_before
        )
        upcoming = stepwise.get_upcoming_steps(task.task_id)[0]
        assert (
            upcoming.step_state["tries"] == 1
            and len(upcoming.step_state["memory"]["messages"]) == 3
        )
        assert stepwise.run_step(task.task_id).is_last
        assert stepwise.finalize_response(task.task_id).response == "Eight: 8."
        # the worker's model calls stream as the step's events, like any worker's
        assert {"agent_input", "agent_stream", "agent_output"} <= set(recorder.types())
        assert {e.step_id for e in recorder.of("agent_output")} == {
            e.step_id for e in recorder.of("step_completed")
        }


class SleepyWorker(CustomSimpleAgentWorker):
    """Only the sync _run_step, and it blocks."""

    def _initialize_state(self, task: Task, **kwargs: Any) -> dict[str, Any]:
        return {"threads": []}

    def _run_step(
        self, state: dict[str, Any], task: Task, input: str | None = None
    ) -> tuple[AgentChatResponse, bool]:
        time.sleep(0.3)
        state["threads"].append(threading.current_thread().name)
        state["sources"].append({"content": "slept", "tool_name": "sleep"})
        return AgentChatResponse(response=f"slept {len(state['threads'])}"), len(
            state["threads"]
        ) >= 2

    def _finalize_task(self, state: dict[str, Any], **kwargs: Any) -> None:
        pass


def test_a_sync_only_worker_runs_under_achat_without_blocking_the_loop() -> None:
    async def main() -> tuple[AgentChatResponse, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        ticking = asyncio.ensure_future(ticker())
        agent = AgentRunner(SleepyWorker(llm=OpenAI(api_base="http://127.0.0.1:9")))
        response = await agent.achat("sleep twice")
        ticking.cancel()
        return response, ticks

    response, ticks = asyncio.run(main())
    assert response.response == "slept 2"
    assert (
        ticks >= 15
    )  # 0.6 s of sleeping in _run_step; the loop kept ticking meanwhile


class BothWaysWorker(SleepyWorker):
    async def _arun_step(
        self, state: dict[str, Any], task: Task, input: str | None = None
    ) -> tuple[AgentChatResponse, bool]:
        state["threads"].append("async")
        return AgentChatResponse(response="async path"), True


def test_arun_step_is_used_on_async_paths_when_defined() -> None:
    agent = AgentRunner(BothWaysWorker(llm=OpenAI(api_base="http://127.0.0.1:9")))
    task = agent.create_task("go")
    assert (
        agent.run_step(task.task_id).output.response == "async path"
    )  # the runner drives arun_step
    assert agent.get_task(task.task_id).extra_state["threads"] == ["async"]


def test_reserved_state_keys_and_tools_or_retriever() -> None:
    class Clashing(SleepyWorker):
        def _initialize_state(self, task: Task, **kwargs: Any) -> dict[str, Any]:
            return {"memory": []}

    agent = AgentRunner(Clashing(llm=OpenAI(api_base="http://127.0.0.1:9")))
    with pytest.raises(ValueError, match="reserved"):
        agent.create_task("go")

    class Retriever:
        def retrieve(self, query: str) -> list[Any]:
            return []

    with pytest.raises(ValueError, match="both tools and tool_retriever"):
        SleepyWorker.from_tools(
            tools=arithmetic_tools(), tool_retriever=Retriever(), llm=OpenAI()
        )
    assert (
        SleepyWorker.from_tools(tool_retriever=Retriever(), llm=OpenAI()).get_tools("x")
        == []
    )


def test_stream_llm_outside_a_step_says_so() -> None:
    worker = SleepyWorker(llm=OpenAI())
    with pytest.raises(RuntimeError, match="inside _run_step"):
        worker.stream_llm(Task(input="x"), [ChatMessage.user("x")])


# --- FnAgentWorker ---------------------------------------------------------------------------------


def count_to_three(state: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    state["n"] += 1
    state["seen"] = state["__task__"].input
    state["__output__"] = f"counted {state['n']}"
    return state, state["n"] >= 3


async def count_async(state: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    await asyncio.sleep(0)
    return count_to_three(state)


@pytest.mark.parametrize("fn", [count_to_three, count_async], ids=["sync", "async"])
def test_fn_worker_runs_steps_with_undo(fn: Any) -> None:
    recorder = Recorder()
    agent = AgentRunner(FnAgentWorker(fn=fn, initial_state={"n": 0}), on_event=recorder)
    task = agent.create_task("count")
    assert agent.run_step(task.task_id).output.response == "counted 1"
    assert agent.run_step(task.task_id).output.response == "counted 2"
    agent.undo_step(task.task_id)
    upcoming = agent.get_upcoming_steps(task.task_id)[0]
    assert upcoming.step_state == {
        "n": 1,
        "seen": "count",
        "__output__": "counted 1",
    }  # no Task in stored state
    assert agent.run_step(task.task_id).output.response == "counted 2"
    assert agent.run_step(task.task_id).is_last
    assert agent.finalize_response(task.task_id).response == "counted 3"
    assert (
        recorder.types().count("step_completed") == 4
        and recorder.types().count("step_undone") == 1
    )


def test_fn_worker_via_chat_and_bad_return() -> None:
    assert (
        str(
            AgentRunner(FnAgentWorker(fn=count_to_three, initial_state={"n": 0})).chat(
                "go"
            )
        )
        == "counted 3"
    )
    broken = AgentRunner(FnAgentWorker(fn=lambda state: state))
    with pytest.raises(Exception, match=r"must return \(state: dict, is_done: bool\)"):
        broken.chat("go")
    with pytest.raises(ValueError, match="needs fn or async_fn"):
        FnAgentWorker()
