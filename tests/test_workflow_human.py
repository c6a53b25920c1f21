"""Questions to the person: pause, save, restore in a fresh workflow, answer; early answers; cancel; timeout."""

from __future__ import annotations

import asyncio
import json

import pytest
from engine_helpers import llm_for, serving
from workflow_helpers import assert_valid_openai_sequence, call, collect

from runs.engine import (
    AgentWorkflow,
    Context,
    FunctionAgent,
    HumanResponseEvent,
    InputRequiredEvent,
    StepCompleted,
    ToolCall,
    ToolCallResult,
    WorkflowCancelledError,
    WorkflowConfigError,
    WorkflowTimeoutError,
)
from runs.engine.testing import Match, Reply, Rule, Timing, ToolCallSpec

asked: list[str] = []


async def ask_budget(ctx: Context, topic: str) -> str:
    """Ask the person for the budget."""
    asked.append(topic)
    answer = await ctx.wait_for_event(
        HumanResponseEvent,
        waiter_id="budget",
        waiter_event=InputRequiredEvent(prefix=f"Budget for {topic}?"),
    )
    return f"budget is {answer.response}"


def lookup(city: str) -> str:
    """Population of a city."""
    return f"{city}: 15M"


BOTH = Reply(
    tool_calls=[
        ToolCallSpec(name="ask_budget", arguments={"topic": "Lagos"}, id="q1"),
        ToolCallSpec(name="lookup", arguments={"city": "Lagos"}, id="q2"),
    ]
)
RULES = [
    Rule(match=Match(tool_results_since_user=0), reply=BOTH),
    Rule(
        match=Match(tool_results_since_user=2),
        reply=Reply(text="Plan: Lagos, 15M people, within budget."),
    ),
]


def _workflow(server) -> AgentWorkflow:  # type: ignore[no-untyped-def]
    agent = FunctionAgent(
        name="planner", tools=[ask_budget, lookup], llm=llm_for(server)
    )
    return AgentWorkflow([agent], initial_state={"budget": None})


@pytest.fixture(autouse=True)
def _clear() -> None:
    asked.clear()


async def _until(handler, kind: type) -> list:  # type: ignore[no-untyped-def]
    seen = []
    async for event in handler.stream_events():
        seen.append(event)
        if isinstance(event, kind):
            return seen
    raise AssertionError(f"no {kind.__name__} in {[e.type for e in seen]}")


async def test_paused_run_is_saved_restored_in_a_fresh_workflow_and_finished() -> None:
    with serving(*RULES) as server:
        handler = _workflow(server).run(user_msg="Plan a Lagos trip")
        seen = await _until(handler, InputRequiredEvent)
        question = seen[-1]
        assert question.prefix == "Budget for Lagos?" and question.waiter_id == "budget"
        assert (
            question.tool_name == "ask_budget"
            and question.current_agent_name == "planner"
        )
        # announced once the step paused (the other call finished, the pause is stored)
        assert any(isinstance(e, StepCompleted) for e in seen)
        saved = json.loads(json.dumps(handler.ctx.to_dict()))
        handler.cancel_run()
        with pytest.raises(WorkflowCancelledError):
            await handler

        # a new process: a new workflow object, the context from its JSON, no new user message
        fresh = _workflow(server)
        ctx = Context.from_dict(fresh, saved)
        resumed = fresh.run(ctx=ctx)
        ctx.send_event(HumanResponseEvent(response="5000 EUR"))
        events, result = await collect(resumed)
        requests = server.requests
    assert result.response.content == "Plan: Lagos, 15M people, within budget."
    assert [
        (e.tool_name, e.tool_output.content)
        for e in events
        if isinstance(e, ToolCallResult)
    ] == [
        ("ask_budget", "budget is 5000 EUR")
    ]  # lookup's result was kept from before the pause, not run again
    assert asked == [
        "Lagos",
        "Lagos",
    ]  # the asking tool runs again from its start once answered
    assert len(requests) == 2
    assert_valid_openai_sequence(requests[1].messages)
    tool_messages = [m for m in requests[1].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["budget is 5000 EUR", "Lagos: 15M"]


async def test_a_paused_call_yields_no_result_until_answered_and_other_calls_do() -> (
    None
):
    with serving(*RULES) as server:
        handler = _workflow(server).run(user_msg="Plan")
        seen = await _until(handler, InputRequiredEvent)
        assert any(isinstance(e, StepCompleted) for e in seen)  # paused, lookup done
        handler.ctx.send_event(HumanResponseEvent(response="100"))
        rest = [e async for e in handler.stream_events()]
        result = await handler
    events = seen + rest
    kinds = [
        (e.type, getattr(e, "tool_name", None))
        for e in events
        if isinstance(
            e, (ToolCall, ToolCallResult, InputRequiredEvent, HumanResponseEvent)
        )
    ]
    answer_at = kinds.index(("human_response", None))
    assert ("tool_call_result", "ask_budget") not in kinds[:answer_at]
    assert ("tool_call_result", "lookup") in kinds[:answer_at]
    assert ("tool_call_result", "ask_budget") in kinds[answer_at:]
    assert result.response.content.startswith("Plan:")


async def test_an_answer_sent_before_the_question_is_kept_and_delivered() -> None:
    with serving(*RULES) as server:
        workflow = _workflow(server)
        ctx = Context(workflow)
        ctx.send_event(HumanResponseEvent(response="early 42"))
        events, result = await collect(workflow.run(user_msg="Plan", ctx=ctx))
    assert result.response.content.startswith("Plan:")
    assert [
        e.tool_output.content
        for e in events
        if isinstance(e, ToolCallResult) and e.tool_name == "ask_budget"
    ] == ["budget is early 42"]


async def test_one_open_question_per_waiter_id() -> None:
    twice = Reply(
        tool_calls=[
            ToolCallSpec(name="ask_budget", arguments={"topic": "A"}, id="a"),
            ToolCallSpec(name="ask_budget", arguments={"topic": "B"}, id="b"),
        ]
    )
    rules = [Rule(match=Match(tool_results_since_user=0), reply=twice), RULES[1]]
    with serving(*rules) as server:
        handler = _workflow(server).run(user_msg="Plan")
        seen = await _until(handler, InputRequiredEvent)
        # both calls asked before the step paused and the question was announced
        assert any(isinstance(e, StepCompleted) for e in seen)
        handler.ctx.send_event(HumanResponseEvent(response="7"))
        rest = [e async for e in handler.stream_events()]
        await handler
    questions = [e for e in seen + rest if isinstance(e, InputRequiredEvent)]
    assert len(questions) == 1
    results = sorted(
        e.tool_output.content for e in rest if isinstance(e, ToolCallResult)
    )
    assert results == ["budget is 7", "budget is 7"]


async def test_cancel_mid_tool_keeps_a_resumable_context_with_a_valid_history() -> None:
    started = asyncio.Event()

    async def slow(city: str) -> str:
        """A slow lookup."""
        started.set()
        await asyncio.sleep(30)
        return city

    rules = [
        Rule(match=Match(last_user_contains="Never mind"), reply=Reply(text="hi")),
        Rule(match=Match(tool_results_since_user=0), reply=call("slow", city="Lagos")),
    ]
    with serving(*rules) as server:
        workflow = AgentWorkflow(
            [FunctionAgent(name="a", tools=[slow], llm=llm_for(server))]
        )
        handler = workflow.run(user_msg="Go")
        await started.wait()
        handler.cancel_run()
        with pytest.raises(WorkflowCancelledError):
            await handler
        saved = handler.ctx.to_dict()
        assert (
            saved["task"]["task"]["memory"]["messages"] == []
        )  # the interrupted turn counts as not run
        # marked interrupted (cut off, not failed), still queued to run again
        (queued,) = saved["task"]["step_queue"]
        assert saved["task"]["step_status"] == {queued["step_id"]: "interrupted"}
        # resumed with a new message instead: the history sent stays valid
        ctx = Context.from_dict(workflow, saved)
        result = await workflow.run(user_msg="Never mind, say hi", ctx=ctx)
        last = server.requests[-1].messages
    assert result.response.content == "hi"
    assert [m["role"] for m in last] == ["user", "user"]
    assert_valid_openai_sequence(last)


async def test_timeout_bounds_a_run_and_the_context_resumes() -> None:
    slow = Rule(
        match=Match(call_index=0), reply=Reply(text="late"), timing=Timing(latency_s=3)
    )
    fast = Rule(reply=Reply(text="on time"))
    with serving(slow, fast) as server:
        agent = FunctionAgent(name="a", llm=llm_for(server))
        handler = AgentWorkflow([agent], timeout=0.5).run(user_msg="Hi")
        with pytest.raises(WorkflowTimeoutError, match="timeout of 0.5 s"):
            await handler
        assert isinstance(WorkflowTimeoutError("x"), TimeoutError)
        saved = handler.ctx.to_dict()
        patient = AgentWorkflow(
            [FunctionAgent(name="a", llm=llm_for(server))], timeout=10
        )
        result = await patient.run(ctx=Context.from_dict(patient, saved))
    assert result.response.content == "on time"


async def test_chat_history_with_unanswered_calls_is_repaired() -> None:
    from runs.engine.messages import ChatMessage, ToolSelection

    broken = [
        ChatMessage.user("Lagos?"),
        ChatMessage.assistant(
            None,
            tool_calls=(
                ToolSelection(tool_id="x1", tool_name="lookup", tool_kwargs={}),
            ),
        ),
        ChatMessage.user("still there?"),
    ]
    with serving(Rule(reply=Reply(text="yes"))) as server:
        workflow = _workflow(server)
        result = await workflow.run(chat_history=broken)
        sent = server.requests[0].messages
    assert result.response.content == "yes"
    assert_valid_openai_sequence(sent)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]


async def test_a_context_saved_as_the_question_arrives_resumes_at_the_pending_call() -> (
    None
):
    """Issue 25, item 2: saved the moment the question is seen (the other call may still be
    running then), the run resumes at the question: the model is not asked again, the call that
    finished does not run again, and only the asking call runs, with the answer."""
    ran: list[str] = []

    async def slow_lookup(city: str) -> str:
        """Population of a city (slow enough to still run when the question comes)."""
        ran.append(city)
        await asyncio.sleep(0.3)
        return f"{city}: 15M"

    both = Reply(
        tool_calls=[
            ToolCallSpec(name="ask_budget", arguments={"topic": "Lagos"}, id="q1"),
            ToolCallSpec(name="slow_lookup", arguments={"city": "Lagos"}, id="q2"),
        ]
    )
    rules = [Rule(match=Match(tool_results_since_user=0), reply=both), RULES[1]]

    def workflow(server) -> AgentWorkflow:  # type: ignore[no-untyped-def]
        agent = FunctionAgent(
            name="planner", tools=[ask_budget, slow_lookup], llm=llm_for(server)
        )
        return AgentWorkflow([agent])

    with serving(*rules) as server:
        handler = workflow(server).run(user_msg="Plan a Lagos trip")
        question = (await _until(handler, InputRequiredEvent))[-1]
        saved = json.loads(json.dumps(handler.ctx.to_dict()))
        handler.cancel_run()
        with pytest.raises(WorkflowCancelledError):
            await handler
        asked_before = len(server.requests)

        fresh = workflow(server)
        ctx = Context.from_dict(fresh, saved)
        resumed = fresh.run(ctx=ctx)
        ctx.send_event(
            HumanResponseEvent(
                response="5000 EUR",
                waiter_id=question.waiter_id,
                tool_id=question.tool_id,
            )
        )
        events, result = await collect(resumed)
        requests = server.requests
    assert asked_before == 1
    assert len(requests) == 2  # one more: the answer's, not the first question again
    assert result.response.content == "Plan: Lagos, 15M people, within budget."
    assert ran == [
        "Lagos"
    ]  # the lookup that finished before the save did not run again
    assert [
        (e.tool_name, e.tool_output.content)
        for e in events
        if isinstance(e, ToolCallResult)
    ] == [("ask_budget", "budget is 5000 EUR")]
    tool_messages = [m for m in requests[1].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["budget is 5000 EUR", "Lagos: 15M"]
    assert_valid_openai_sequence(requests[1].messages)


async def test_an_answer_to_a_question_that_no_longer_waits_is_refused() -> None:
    with serving(*RULES) as server:
        handler = _workflow(server).run(user_msg="Plan a Lagos trip")
        question = (await _until(handler, InputRequiredEvent))[-1]
        with pytest.raises(WorkflowConfigError, match="no question 'other' is waiting"):
            handler.ctx.send_event(HumanResponseEvent(response="1", waiter_id="other"))
        with pytest.raises(WorkflowConfigError, match="asked by tool call 'q1'"):
            handler.ctx.send_event(
                HumanResponseEvent(
                    response="1", waiter_id=question.waiter_id, tool_id="q2"
                )
            )
        handler.ctx.send_event(
            HumanResponseEvent(response="100", waiter_id=question.waiter_id)
        )
        result = await handler
        assert result.response.content.startswith("Plan:")
        with pytest.raises(WorkflowConfigError, match="already answered"):
            handler.ctx.send_event(
                HumanResponseEvent(response="200", waiter_id=question.waiter_id)
            )
