"""The seed's usage pattern and the runner's public API, through the real openai SDK."""

from __future__ import annotations

import time

from engine_helpers import SEED_QUESTION, make_agent, seed_rules, serving

from runs.engine import AgentChatResponse, parse_event
from runs.engine.testing.script import Timing


def test_seed_usage_pattern_step_by_step() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        task = agent.create_task(SEED_QUESTION)
        assert [s.step_id for s in agent.get_upcoming_steps(task.task_id)]
        outputs = []
        step_output = agent.run_step(task.task_id)
        outputs.append(step_output)
        while not step_output.is_last:
            step_output = agent.run_step(task.task_id)
            outputs.append(step_output)
        response = agent.finalize_response(task.task_id)
    assert "405" in response.response
    assert len(outputs) == 3
    assert [s.content for s in response.sources] == ["363", "405"]
    assert len(agent.get_completed_steps(task.task_id)) == 3
    assert agent.get_upcoming_steps(task.task_id) == []
    assert agent.get_task_output(task.task_id).is_last
    assert [t.task_id for t in agent.get_completed_tasks()] == [task.task_id]
    # the task's conversation became the agent's memory
    roles = [m.role.value for m in agent.chat_history]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


def test_run_step_accepts_the_task_object() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        task = agent.create_task(SEED_QUESTION)
        assert not agent.run_step(task).is_last


def test_chat_and_query() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        assert "405" in str(agent.chat(SEED_QUESTION))
        assert "405" in str(agent.query(SEED_QUESTION))


async def test_achat() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        response = await agent.achat(SEED_QUESTION)
    assert isinstance(response, AgentChatResponse)
    assert "405" in response.response


def test_stream_chat_yields_tokens_before_the_step_ends() -> None:
    rules = seed_rules()
    rules[-1] = rules[-1].model_copy(update={"timing": Timing(token_delay_s=0.05)})
    with serving(*rules) as server:
        agent, recorder = make_agent(server)
        stream = agent.stream_chat(SEED_QUESTION)
        arrivals = []
        pieces = []
        for delta in stream.response_gen:
            arrivals.append(time.time())
            pieces.append(delta)
    completed_at = recorder.of("step_completed")[-1].at
    assert len(pieces) > 3
    assert "".join(pieces) == stream.response == "(121 * 3) + 42 = 405"
    assert (
        arrivals[0] < completed_at - 0.1
    )  # the first token came well before the step finished


async def test_astream_chat() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        stream = await agent.astream_chat(SEED_QUESTION)
        pieces = [delta async for delta in stream.async_response_gen()]
    assert "".join(pieces) == "(121 * 3) + 42 = 405"
    assert [s.content for s in stream.sources] == ["363", "405"]


def test_event_sequence_a_user_sees() -> None:
    with serving(*seed_rules()) as server:
        agent, recorder = make_agent(server)
        agent.chat(SEED_QUESTION)
    first_step = recorder.types()[: recorder.types().index("step_completed") + 1]
    assert first_step == [
        "task_created",
        "step_created",
        "step_started",
        "agent_input",
        "agent_output",
        "tool_call",
        "tool_call_result",
        "step_completed",
    ]
    last = recorder.types()
    assert last[-1] == "task_completed"
    assert "agent_stream" in last
    answer_step = recorder.of("step_completed")[-1]
    streams = [
        e
        for e in recorder.events
        if e.type == "agent_stream" and e.step_id == answer_step.step_id
    ]
    assert streams and streams[-1].response == "(121 * 3) + 42 = 405"  # type: ignore[union-attr]
    task_id = recorder.events[0].task_id
    for event in recorder.events:
        assert event.task_id == task_id
        if event.type not in ("task_created", "task_completed", "task_deleted"):
            assert event.step_id, event


def test_every_event_round_trips_through_json() -> None:
    with serving(*seed_rules()) as server:
        agent, recorder = make_agent(server)
        agent.chat(SEED_QUESTION)
    assert len(set(recorder.types())) >= 9
    for event in recorder.events:
        assert parse_event(event.model_dump_json()) == event
        assert parse_event(event.model_dump(mode="json")) == event


def test_on_event_may_be_async() -> None:
    seen: list[str] = []

    async def handler(event: object) -> None:
        seen.append(event.type)  # type: ignore[attr-defined]

    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        agent.on_event = handler
        agent.chat(SEED_QUESTION)
    assert seen[0] == "task_created" and seen[-1] == "task_completed"


def test_second_turn_sees_the_first() -> None:
    with serving(*seed_rules()) as server:
        agent, _ = make_agent(server)
        agent.chat(SEED_QUESTION)
        server.clear_requests()
        task = agent.create_task("And doubled?")
        agent.run_step(task.task_id)
        sent = server.requests[-1].messages
    assert sent[0]["content"] == SEED_QUESTION
    assert sent[-1]["content"] == "And doubled?"


def test_delete_task_leaves_agent_memory_as_before() -> None:
    with serving(*seed_rules()) as server:
        agent, recorder = make_agent(server)
        agent.chat(SEED_QUESTION)
        before = agent.chat_history
        task = agent.create_task(SEED_QUESTION)
        agent.run_step(task.task_id)
        agent.delete_task(task.task_id)
    assert agent.chat_history == before
    assert recorder.types()[-1] == "task_deleted"
    assert task.task_id not in [t.task_id for t in agent.list_tasks()]


def test_rule_is_importable_from_the_testing_package() -> None:
    # the engine package itself does not export test helpers
    import runs.engine as engine

    assert not hasattr(engine, "ScriptedServer")


async def test_concurrent_steps_of_one_task_run_one_at_a_time() -> None:
    import asyncio

    with serving(*seed_rules()) as server:
        agent, recorder = make_agent(server)
        task = await agent.acreate_task(SEED_QUESTION)
        first, second = await asyncio.gather(
            agent.arun_step(task.task_id), agent.arun_step(task.task_id)
        )
    # the second waited for the first and ran the step the first one queued
    assert first.task_step.step_id != second.task_step.step_id
    assert second.task_step.prev_steps == [first.task_step.step_id]
    starts = [e.step_id for e in recorder.of("step_started")]
    completions = [e.step_id for e in recorder.of("step_completed")]
    assert starts == completions
    assert not agent._locks  # nothing kept once no one holds a task's lock
