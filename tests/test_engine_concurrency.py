"""The runner under concurrency and failure: streams, memory, cancellation, deletion, one call a turn."""

from __future__ import annotations

import asyncio

import pytest
from engine_helpers import (
    SEED_QUESTION,
    Recorder,
    arithmetic_tools,
    llm_for,
    make_agent,
    seed_rules,
    serving,
)

from runs.engine import (
    AgentRunner,
    FunctionCallingAgentWorker,
    StepStarted,
    StepStatus,
    UnknownTaskError,
)
from runs.engine.testing import Match, Reply, Rule, Timing, ToolCallSpec


def _answer(word: str, text: str, delay: float = 0.02) -> Rule:
    return Rule(
        match=Match(last_user_contains=word),
        reply=Reply(text=text),
        timing=Timing(token_delay_s=delay),
    )


async def test_two_streams_on_one_runner_keep_their_own_tokens() -> None:
    with serving(
        _answer("alpha", "a1 a2 a3 a4 a5 a6"), _answer("beta", "b1 b2 b3 b4 b5 b6")
    ) as server:
        agent, _ = make_agent(server)
        first = await agent.astream_chat("alpha?")
        second = await agent.astream_chat("beta?")

        async def read(stream: object) -> str:
            return "".join([d async for d in stream.async_response_gen()])  # type: ignore[attr-defined]

        texts = await asyncio.gather(read(first), read(second))
    assert texts == ["a1 a2 a3 a4 a5 a6", "b1 b2 b3 b4 b5 b6"]


async def test_aget_response_after_the_stream_was_read() -> None:
    with serving(_answer("alpha", "all of it")) as server:
        agent, _ = make_agent(server)
        stream = await agent.astream_chat("alpha?")
        assert "".join([d async for d in stream.async_response_gen()]) == "all of it"
        response = await asyncio.wait_for(stream.aget_response(), timeout=5)
    assert response.response == "all of it"


async def test_two_finalized_tasks_both_stay_in_memory_and_undo_takes_only_its_own() -> (
    None
):
    with serving(_answer("alpha", "A"), _answer("beta", "B")) as server:
        agent, _ = make_agent(server)
        first = await agent.acreate_task("alpha?")
        second = await agent.acreate_task("beta?")
        await agent.arun_step(first.task_id)
        await agent.arun_step(second.task_id)
        await agent.afinalize_response(first.task_id)
        await agent.afinalize_response(second.task_id)
        assert [m.text for m in agent.chat_history] == ["alpha?", "A", "beta?", "B"]
        await agent.aundo_step(first.task_id)
        assert [m.text for m in agent.chat_history] == ["beta?", "B"]
        # the undone task can run again and finish; the other conversation stays
        await agent.arun_step(first.task_id)
        await agent.afinalize_response(first.task_id)
        assert [m.text for m in agent.chat_history] == ["beta?", "B", "alpha?", "A"]


async def test_a_cancelled_step_leaves_the_task_as_before_and_reruns_cleanly() -> None:
    slow = Rule(
        match=Match(last_user_contains="alpha"),
        reply=Reply(text="late"),
        timing=Timing(ttft_s=3),
    )
    with serving(slow) as server:
        agent, recorder = make_agent(server)
        task = await agent.acreate_task("alpha?")
        running = asyncio.ensure_future(agent.arun_step(task.task_id))
        await asyncio.to_thread(server.wait_for_requests, 1)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        state = await agent.aget_task_state(task.task_id)
        step_id = state.step_queue[0].step_id
        # queued as before, marked as cut off (not failed): it can run again
        assert state.step_status[step_id] is StepStatus.INTERRUPTED
        assert len(state.task.memory) == 0 and not state.completed_steps
        assert not recorder.of("step_failed")
        assert recorder.of("step_interrupted")[-1].reason == "cancelled"
        server.load(
            server.script.model_copy(
                update={"rules": [_answer("alpha", "now", delay=0)]}
            )
        )
        output = await agent.arun_step(task.task_id)
        assert output.is_last
        users = [m for m in server.requests[-1].messages if m["role"] == "user"]
        assert [m["content"] for m in users] == ["alpha?"]  # sent once, not twice


async def test_a_handler_that_fails_on_step_started_leaves_the_step_runnable() -> None:
    with serving(*seed_rules()) as server:
        recorder = Recorder()
        broken = {"on": True}

        def handler(event: object) -> None:
            recorder(event)  # type: ignore[arg-type]
            if broken["on"] and isinstance(event, StepStarted):
                raise OSError("the event store is down")

        worker = FunctionCallingAgentWorker.from_tools(
            arithmetic_tools(), llm=llm_for(server)
        )
        agent = AgentRunner(worker, on_event=handler)
        task = await agent.acreate_task(SEED_QUESTION)
        with pytest.raises(Exception, match="event store is down"):
            await agent.arun_step(task.task_id)
        state = await agent.aget_task_state(task.task_id)
        assert state.step_status[state.step_queue[0].step_id] is StepStatus.FAILED
        assert len(state.task.memory) == 0
        broken["on"] = False
        output = await agent.arun_step(task.task_id)
        assert not output.is_last and output.output.sources[0].content == "363"


async def test_deleting_a_task_while_its_step_finishes_does_not_bring_it_back() -> None:
    slow = Rule(
        match=Match(last_user_contains="alpha"),
        reply=Reply(text="done"),
        timing=Timing(ttft_s=0.5),
    )
    with serving(slow) as server:
        agent, _ = make_agent(server)
        task = await agent.acreate_task("alpha?")
        running = asyncio.ensure_future(agent.arun_step(task.task_id))
        await asyncio.to_thread(server.wait_for_requests, 1)
        await agent.adelete_task(task.task_id)
        await running
        with pytest.raises(UnknownTaskError):
            await agent.aget_task_state(task.task_id)
        assert await agent.alist_tasks() == []


def test_one_call_at_a_time_asks_the_model_and_keeps_the_history_valid() -> None:
    two_calls = Reply(
        tool_calls=[
            ToolCallSpec(name="multiply", arguments={"a": 121, "b": 3}, id="c1"),
            ToolCallSpec(name="add", arguments={"a": 1, "b": 2}, id="c2"),
        ]
    )
    rules = [
        Rule(match=Match(tool_results_since_user=0), reply=two_calls),
        Rule(match=Match(tool_results_since_user=1), reply=Reply(text="363")),
    ]
    with serving(*rules) as server:
        worker = FunctionCallingAgentWorker.from_tools(
            arithmetic_tools(), llm=llm_for(server), allow_parallel_tool_calls=False
        )
        response = AgentRunner(worker).chat(SEED_QUESTION)
        first, second = server.requests
    assert response.response == "363"
    assert first.body["parallel_tool_calls"] is False
    assistant = next(m for m in second.messages if m["role"] == "assistant")
    answered = [m["tool_call_id"] for m in second.messages if m["role"] == "tool"]
    assert [c["id"] for c in assistant["tool_calls"]] == answered == ["c1"]
