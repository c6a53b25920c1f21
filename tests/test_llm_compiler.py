"""LLMCompilerAgentWorker under AgentRunner, against the scripted server through the real openai SDK."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from engine_helpers import Recorder, llm_for

from runs.engine import (
    AgentRunner,
    AgentStream,
    BaseTool,
    FunctionTool,
    LLMCompilerAgentWorker,
    PendingToolCall,
    StepFailedError,
    StepKind,
    ToolArgumentsError,
    ToolCall,
    ToolCallResult,
    parse_event,
)
from runs.engine.testing import (
    Fault,
    Match,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
)
from runs.engine.workers.llm_compiler.prompts import LAST_ROUND_NOTE

PLANNER = "utmost parallelizability"
REPLANNER = "new round of an earlier plan"
JOINER = "Solve a question answering task"
LINES = Timing(ttft_s=0.05, token_delay_s=0.02, chunking="line")


def planner(
    plan: str, *, replan: bool = False, timing: Timing = LINES, **rule: Any
) -> Rule:
    match = Match(system_contains=REPLANNER if replan else PLANNER)
    return Rule(name="plan", match=match, reply=Reply(text=plan), timing=timing, **rule)


def joiner(reply: str, *contains: str, **rule: Any) -> Rule:
    return Rule(
        name="join",
        match=Match(last_user_contains=[JOINER, *contains]),
        reply=Reply(text=reply),
        **rule,
    )


class Calls:
    """Tools that record when they ran (thread-safe: plain def tools run in a thread pool)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []
        self.lock = threading.Lock()

    def tools(self, delay: float = 0.05) -> list[BaseTool]:
        async def search(query: str) -> str:
            """Search the web for a query."""
            start = time.time()
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self._note(f"cancelled search:{query}", start)
                raise
            self._note(f"search:{query}", start)
            return f"<{query}>"

        def measure(text: str) -> int:
            """Count the characters of a text (a plain def: runs in a thread)."""
            start = time.time()
            time.sleep(delay)
            self._note(f"measure:{text}", start)
            return len(text)

        async def compose(text: str) -> str:
            """Write a sentence."""
            self._note(f"compose:{text}", time.time())
            return text.upper()

        async def fail(reason: str) -> str:
            """Always fails."""
            raise ValueError(reason)

        return [FunctionTool.from_defaults(f) for f in (search, measure, compose, fail)]

    def _note(self, name: str, start: float) -> None:
        with self.lock:
            self.spans.append((name, start, time.time()))

    def names(self) -> list[str]:
        return [name for name, _, _ in self.spans]


def make(
    server: ScriptedServer,
    tools: Sequence[BaseTool],
    approve: bool = False,
    **worker: Any,
) -> tuple[AgentRunner, Recorder]:
    recorder = Recorder()
    agent = LLMCompilerAgentWorker.from_tools(
        tools, llm=llm_for(server), **worker
    ).as_agent(on_event=recorder, approve_tool_calls=approve)
    return agent, recorder


def results(recorder: Recorder) -> dict[int, ToolCallResult]:
    return {
        e.plan_index: e
        for e in recorder.events
        if isinstance(e, ToolCallResult) and e.plan_index is not None
    }


def tool_calls(recorder: Recorder) -> dict[int, ToolCall]:
    return {
        e.plan_index: e
        for e in recorder.events
        if isinstance(e, ToolCall) and e.plan_index is not None
    }


def max_overlap(spans: list[tuple[float, float]]) -> int:
    points = sorted(
        [(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
        key=lambda p: (p[0], p[1]),
    )
    best = current = 0
    for _, change in points:
        current += change
        best = max(best, current)
    return best


# --- plan shapes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["search", "measure"])
def test_fan_out_runs_independent_calls_at_once(tool: str) -> None:
    k = 5
    plan = "\n".join(
        [f'{i}. {tool}("item{i}")' for i in range(1, k + 1)]
        + [f"{k + 1}. join()<END_OF_PLAN>"]
    )
    calls = Calls()
    with ScriptedServer(
        Script(
            rules=[
                planner(plan),
                joiner("Thought: all in\nAction: Finish(five results)"),
            ]
        )
    ) as server:
        agent, recorder = make(server, calls.tools(delay=0.3))
        response = agent.chat("look up five items")
        planner_request = server.requests[0]
    assert response.response == "five results"
    assert len(response.sources) == k
    assert (
        max_overlap([(s, e) for _, s, e in calls.spans]) == k
    )  # async and plain def tools alike
    assert (
        planner_request.body["stop"] == ["<END_OF_PLAN>"] and not planner_request.tools
    )
    assert [m.role.value for m in agent.chat_history] == ["user", "assistant"]


def test_chain_passes_each_result_on() -> None:
    plan = '1. search("a")\n2. measure("$1")\n3. compose("length is $2")\n4. join()'
    calls = Calls()
    with ScriptedServer(
        Script(rules=[planner(plan), joiner("Thought: t\nAction: Finish(done)")])
    ) as server:
        agent, recorder = make(server, calls.tools())
        agent.chat("chain")
    assert calls.names() == ["search:a", "measure:<a>", "compose:length is 3"]
    done = results(recorder)
    assert (
        done[2].tool_kwargs == {"text": "<a>"}
        and done[3].tool_output.content == "LENGTH IS 3"
    )
    assert tool_calls(recorder)[3].depends_on == [2]


def test_diamond_and_an_argument_embedding_two_references() -> None:
    plan = '1. search("root")\n2. measure("$1")\n3. search("$1 again")\n4. compose("${2} chars; ${3}")\n5. join()'
    calls = Calls()
    with ScriptedServer(
        Script(rules=[planner(plan), joiner("Thought: t\nAction: Finish(ok)")])
    ) as server:
        agent, recorder = make(server, calls.tools(delay=0.1))
        agent.chat("diamond")
    done, planned = results(recorder), tool_calls(recorder)
    assert [planned[i].depends_on for i in (1, 2, 3, 4)] == [[], [1], [1], [2, 3]]
    assert done[4].tool_kwargs == {"text": "6 chars; <<root> again>"}
    assert (
        done[2].started_at < done[3].ended_at and done[3].started_at < done[2].ended_at
    )  # siblings overlap
    assert done[4].started_at >= max(done[2].ended_at, done[3].ended_at)


def test_a_failing_call_and_its_dependants_are_observations_for_the_joiner() -> None:
    plan = '1. fail("disk on fire")\n2. compose("$1")\n3. search("fine")\n4. join()'
    with ScriptedServer(
        Script(
            rules=[
                planner(plan),
                joiner("Thought: 1 failed\nAction: Finish(partial answer)"),
            ]
        )
    ) as server:
        agent, recorder = make(server, Calls().tools())
        response = agent.chat("fail please")
        join_prompt = server.requests[1].last_user_text
    done = results(recorder)
    assert (
        done[1].tool_output.is_error
        and "ValueError: disk on fire" in done[1].tool_output.content
    )
    assert (
        done[2].tool_output.is_error
        and "not run because call 1 (fail) failed" in done[2].tool_output.content
    )
    assert not done[3].tool_output.is_error
    assert "Observation: Error: ValueError: disk on fire" in join_prompt
    assert "not run because call 1" in join_prompt
    assert response.response == "partial answer"


def test_an_unknown_tool_is_reported_to_the_joiner() -> None:
    plan = '1. teleport("Mars")\n2. search("$1")\n3. join()'
    with ScriptedServer(
        Script(
            rules=[
                planner(plan),
                joiner("Thought: no such tool\nAction: Finish(cannot)"),
            ]
        )
    ) as server:
        agent, recorder = make(server, Calls().tools())
        assert agent.chat("go to mars").response == "cannot"
        join_prompt = server.requests[1].last_user_text
    assert "there is no tool named 'teleport'" in join_prompt
    assert results(recorder)[2].tool_output.is_error


def test_plan_problems_reach_the_joiner() -> None:
    plan = '1. search("$2")\n2. search("$1")\n3. measure(oops)'  # a cycle, bad arguments, no join()
    with ScriptedServer(
        Script(rules=[planner(plan), joiner("Thought: broken\nAction: Finish(sorry)")])
    ) as server:
        agent, _ = make(server, Calls().tools())
        agent.chat("broken plan")
        join_prompt = server.requests[1].last_user_text
    assert "Problem with this plan: the plan does not end with join()" in join_prompt
    assert "cycle" in join_prompt and "cannot read call 3" in join_prompt


# --- streaming ------------------------------------------------------------------------------------------


def test_calls_start_while_the_planner_is_still_writing() -> None:
    plan = 'Thought: go\n1. search("a")\n2. search("b")\n3. search("c")\n4. join()<END_OF_PLAN>'
    slow_lines = Timing(ttft_s=0.3, token_delay_s=0.2, chunking="line")
    with ScriptedServer(
        Script(
            rules=[
                planner(plan, timing=slow_lines),
                joiner("Thought: t\nAction: Finish(x)"),
            ]
        )
    ) as server:
        agent, recorder = make(server, Calls().tools(delay=0.5))
        agent.chat("stream it")
        request = server.requests[0]
    assert request.t_first_chunk is not None
    line_sent = [
        request.t_first_chunk + i * 0.2 for i in range(5)
    ]  # chunk i carries line i
    done = results(recorder)
    assert (
        done[1].started_at < line_sent[3]
    )  # call 1 runs before the planner has sent line 3 ...
    assert done[1].started_at < line_sent[2]  # ... indeed before line 2
    assert done[1].started_at == pytest.approx(line_sent[1], abs=0.1)
    assert done[3].started_at == pytest.approx(line_sent[3], abs=0.1)
    plan_text = [
        e.delta
        for e in recorder.events
        if isinstance(e, AgentStream) and e.phase == "plan"
    ]
    assert "".join(plan_text) == plan


def test_a_planner_stream_cut_off_mid_plan_fails_the_step_and_leaves_state_intact() -> (
    None
):
    plan = 'Thought: go\n1. search("a")\n2. search("b")\n3. join()'
    cut = planner(plan, fault=Fault(cut_after_chunks=2), max_uses=1)
    calls = Calls()
    with ScriptedServer(
        Script(
            rules=[cut, planner(plan), joiner("Thought: t\nAction: Finish(second try)")]
        )
    ) as server:
        agent, recorder = make(server, calls.tools(delay=0.3))
        task = agent.create_task("cut me")
        before = agent.get_task_state(task.task_id)
        extra_before, queue_before = (
            copy.deepcopy(before.task.extra_state),
            [s.step_id for s in before.step_queue],
        )
        with pytest.raises(StepFailedError, match="broke off after 1 planned call"):
            agent.run_step(task.task_id)
        after = agent.get_task_state(task.task_id)
        assert len(after.task.memory) == 0
        assert after.task.extra_state == extra_before
        assert [s.step_id for s in after.step_queue] == queue_before
        # the call dispatched before the cut was cancelled, not left running
        assert "cancelled search:a" in calls.names()
        assert "search:a" not in calls.names()
        output = agent.run_step(task.task_id)  # the same step runs again
        assert output.is_last and output.output.response == "second try"
    failed = recorder.of("step_failed")
    assert len(failed) == 1 and "broke off" in failed[0].error  # type: ignore[union-attr]


# --- events ---------------------------------------------------------------------------------------------


def test_event_sequence_and_the_dag_in_tool_calls() -> None:
    plan = 'Thought: two then one\n1. search("a")\n2. search("b")\n3. compose("$1$2")\n4. join()<END_OF_PLAN>'
    with ScriptedServer(
        Script(rules=[planner(plan), joiner("Thought: t\nAction: Finish(AB)")])
    ) as server:
        agent, recorder = make(server, Calls().tools(delay=0.01))
        agent.chat("events")
    types = [t for t in recorder.types() if t != "agent_stream"]
    assert types[:4] == ["task_created", "step_created", "step_started", "agent_input"]
    assert types[-4:] == [
        "agent_input",
        "agent_output",
        "step_completed",
        "task_completed",
    ]
    assert types.count("tool_call") == types.count("tool_call_result") == 3
    inputs = [e for e in recorder.events if e.type == "agent_input"]
    assert [e.phase for e in inputs] == ["plan", "join"]
    join_at = recorder.events.index(inputs[1])
    for position, event in enumerate(recorder.events):
        if isinstance(event, AgentStream):
            assert event.phase == ("plan" if position < join_at else "join")
        if isinstance(event, ToolCallResult):
            assert position < join_at and event.started_at <= event.ended_at
            call = next(
                e
                for e in recorder.events
                if isinstance(e, ToolCall) and e.tool_id == event.tool_id
            )
            assert recorder.events.index(call) < position
    planned = tool_calls(recorder)
    assert {i: planned[i].depends_on for i in planned} == {1: [], 2: [], 3: [1, 2]}
    assert planned[3].tool_kwargs == {"text": "<a><b>"}
    assert all(
        e.step_id == inputs[0].step_id
        for e in recorder.events
        if isinstance(e, ToolCall | ToolCallResult)
    )
    for event in recorder.events:
        assert parse_event(event.model_dump_json()) == event


# --- rounds ---------------------------------------------------------------------------------------------


def replan_script(
    final_round_reply: str = "Thought: now I know\nAction: Finish(the answer (final))",
) -> Script:
    return Script(
        rules=[
            planner('3. compose("$1 retried")\n4. join()<END_OF_PLAN>', replan=True),
            planner('1. search("first")\n2. fail("nope")\n3. join()'),
            joiner(final_round_reply, "Round 2:"),
            joiner(
                "Thought: call 2 failed\nAction: Replan(call 2 failed (nope); try compose)"
            ),
        ]
    )


def test_replan_starts_a_new_step_that_sees_the_earlier_round_and_then_finishes() -> (
    None
):
    calls = Calls()
    with ScriptedServer(replan_script()) as server:
        agent, recorder = make(server, calls.tools())
        task = agent.create_task("needs two rounds")
        first = agent.run_step(task.task_id)
        assert (
            not first.is_last
            and first.output.response == "Replan: call 2 failed (nope); try compose"
        )
        [second_step] = agent.get_upcoming_steps(task.task_id)
        assert second_step.kind is StepKind.PLAN and second_step.step_state == {
            "round": 2
        }
        second = agent.run_step(task.task_id)
        replan_request = server.requests[2]
        response = agent.finalize_response(task.task_id)
    assert second.is_last and response.response == "the answer (final)"
    replan_prompt = replan_request.last_user_text
    assert "Question: needs two rounds" in replan_prompt
    assert '1. search("first")\nObservation: <first>' in replan_prompt
    assert "Observation: Error: ValueError: nope" in replan_prompt
    assert "Thought after this round: call 2 failed" in replan_prompt
    assert (
        "do not repeat them" in replan_prompt
        and "Number the first call of the new plan 3." in replan_prompt
    )
    assert REPLANNER in replan_request.system_text
    # round 2's call 3 used round 1's result without running search again
    assert calls.names() == ["search:first", "compose:<first> retried"]
    assert tool_calls(recorder)[3].depends_on == [1]
    assert [m.role.value for m in agent.chat_history] == ["user", "assistant"]
    assert len(agent.get_completed_steps(task.task_id)) == 2


def test_undoing_a_replan_round_restores_the_task_exactly() -> None:
    with ScriptedServer(replan_script()) as server:
        agent, recorder = make(server, Calls().tools())
        task = agent.create_task("needs two rounds")
        initial = agent.get_task_state(task.task_id).task.extra_state
        initial = copy.deepcopy(initial)
        agent.run_step(task.task_id)
        round_1 = agent.get_task_state(task.task_id)
        extra_after_round_1 = copy.deepcopy(round_1.task.extra_state)
        memory_after_round_1 = round_1.task.memory.get_all()
        queue_after_round_1 = [s.step_id for s in round_1.step_queue]
        agent.run_step(task.task_id)
        agent.finalize_response(task.task_id)
        undone = agent.undo_step(task.task_id)
        state = agent.get_task_state(task.task_id)
        assert undone.step_state == {"round": 2}
        assert state.task.extra_state == extra_after_round_1
        assert (
            state.task.memory.get_all() == memory_after_round_1
            and len(memory_after_round_1) == 1
        )
        assert [s.step_id for s in state.step_queue] == queue_after_round_1
        assert (
            agent.chat_history == []
        )  # the finished answer left the agent's memory again
        agent.undo_step(task.task_id)  # and round 1 too
        state = agent.get_task_state(task.task_id)
        assert state.task.extra_state == initial and len(state.task.memory) == 0
        redo = agent.run_step(task.task_id)
        assert redo.output.response.startswith("Replan:")
    assert recorder.types().count("step_undone") == 2


def always_replanning() -> Script:
    """A joiner that never finishes: every round asks for another plan."""
    return Script(
        rules=[
            planner('1. search("again")\n2. join()', replan=True),
            planner('1. search("x")\n2. join()'),
            joiner("Thought: unsure\nAction: Replan(more data)"),
        ]
    )


@pytest.mark.parametrize(("max_replans", "rounds"), [(0, 1), (1, 2), (3, 4)])
def test_max_replans_counts_replans_and_the_last_round_answers_with_what_is_known(
    max_replans: int, rounds: int
) -> None:
    with ScriptedServer(always_replanning()) as server:
        agent, _ = make(server, Calls().tools(), max_replans=max_replans)
        response = agent.chat("never sure")
        joins = [r for r in server.requests if JOINER in r.last_user_text]
    assert len(joins) == rounds  # one plan, then max_replans replans
    assert (
        response.response == "more data"
    )  # LlamaIndex's forced answer: the joiner's own words
    assert LAST_ROUND_NOTE in joins[-1].last_user_text
    assert all(LAST_ROUND_NOTE not in r.last_user_text for r in joins[:-1])
    assert [m.text for m in agent.chat_history] == ["never sure", "more data"]


def test_the_default_allows_three_replans() -> None:
    with ScriptedServer(always_replanning()) as server:
        worker = LLMCompilerAgentWorker.from_tools(Calls().tools(), llm=llm_for(server))
        agent = worker.as_agent()
        task = agent.create_task("never sure")
        outputs = []
        while not outputs or not outputs[-1].is_last:
            outputs.append(agent.run_step(task.task_id))
    assert worker.max_replans == 3 and len(outputs) == 4
    assert [o.output.response for o in outputs] == ["Replan: more data"] * 3 + [
        "more data"
    ]


def test_a_forced_answer_without_words_lists_the_results() -> None:
    script = Script(
        rules=[planner('1. search("x")\n2. join()'), joiner("Action: Replan()")]
    )
    with ScriptedServer(script) as server:
        agent, _ = make(server, Calls().tools(), max_replans=0)
        assert agent.chat("q").response == "search: <x>"


def test_the_planner_and_joiner_see_earlier_turns() -> None:
    script = Script(
        rules=[
            planner("1. join()"),
            joiner("Thought: t\nAction: Finish(Paris)", "capital of France"),
            joiner("Thought: t\nAction: Finish(about 2 million)", "how many people"),
        ]
    )
    with ScriptedServer(script) as server:
        agent, _ = make(server, Calls().tools())
        assert agent.chat("What is the capital of France?").response == "Paris"
        assert (
            agent.chat("And how many people live there?").response == "about 2 million"
        )
        second_plan, second_join = server.requests[2], server.requests[3]
    for request in (second_plan, second_join):
        texts = [(m["role"], m["content"]) for m in request.messages]
        assert ("user", "What is the capital of France?") in texts and (
            "assistant",
            "Paris",
        ) in texts
    assert [m.role.value for m in agent.chat_history] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


# --- approval ---------------------------------------------------------------------------------------------


def test_with_approval_the_plan_waits_and_a_rejection_reaches_the_dependants() -> None:
    plan = '1. search("a")\n2. search("b")\n3. compose("$1 and $2")\n4. join()'
    calls = Calls()
    with ScriptedServer(
        Script(
            rules=[planner(plan), joiner("Thought: b rejected\nAction: Finish(only a)")]
        )
    ) as server:
        agent, recorder = make(server, calls.tools(), approve=True)
        task = agent.create_task("approve me")
        planned = agent.run_step(task.task_id)
        assert calls.names() == [] and not recorder.of("tool_call")  # nothing ran yet
        [approval] = agent.get_upcoming_steps(task.task_id)
        assert approval.kind is StepKind.TOOL_CALLS and planned.output.response == plan
        pending = approval.tool_calls or []
        # call 3 needs the results of 1 and 2: it waits for them, to be shown with them
        assert [(c.tool_name, c.tool_kwargs) for c in pending] == [
            ("search", {"query": "a"}),
            ("search", {"query": "b"}),
        ]
        # each waits with its place in the plan, so the page draws it in the DAG before it runs
        assert [(c.plan_index, c.depends_on) for c in pending] == [(1, []), (2, [])]
        agent.approve_tool_call(
            task.task_id,
            approval.step_id,
            pending[0].tool_id,
            tool_kwargs={"query": "A"},
        )
        agent.reject_tool_call(
            task.task_id, approval.step_id, pending[1].tool_id, "too costly"
        )
        first = agent.run_step(task.task_id)
        assert not first.is_last and calls.names() == ["search:A"]
        [wave] = agent.get_upcoming_steps(task.task_id)
        [compose] = wave.tool_calls or []
        assert compose.tool_kwargs == {"text": "<A> and rejected by user: too costly"}
        assert compose.planned_kwargs == {"text": "$1 and $2"}
        assert (compose.plan_index, compose.depends_on) == (3, [1, 2])
        # a call stored before these fields existed still loads (the page then draws no edges)
        stored = compose.model_dump(mode="json", exclude={"plan_index", "depends_on"})
        old = PendingToolCall.model_validate(stored)
        assert (old.plan_index, old.depends_on) == (None, [])
        assert compose.arguments_error == (
            "not run because call 2 (search) failed: rejected by user: too costly"
        )
        output = agent.run_step(task.task_id)
    assert output.is_last and output.output.response == "only a"
    assert calls.names() == ["search:A"]
    done = results(recorder)
    assert done[2].tool_output.content == "rejected by user: too costly"
    assert (
        "not run because call 2 (search) failed: rejected by user: too costly"
        in done[3].tool_output.content
    )
    assert tool_calls(recorder)[3].depends_on == [1, 2]
    assert done[3].tool_kwargs == compose.tool_kwargs  # what was shown is what ran


def test_with_approval_a_dependant_is_shown_with_the_result_it_uses() -> None:
    """The person approves values, never references: call 2 is offered with call 1's result in
    place of "$1", an edit of that value is what runs, and a typed "$1" is not a value."""
    plan = (
        '1. search("abc")\n2. measure("$1")\n3. compose("$1 has $2 chars")\n4. join()'
    )
    calls = Calls()
    with ScriptedServer(
        Script(rules=[planner(plan), joiner("Thought: ok\nAction: Finish(done)")])
    ) as server:
        agent, recorder = make(server, calls.tools(), approve=True)
        task = agent.create_task("edit me")
        agent.run_step(task.task_id)
        [first] = agent.get_upcoming_steps(task.task_id)
        assert [c.tool_kwargs for c in first.tool_calls or []] == [{"query": "abc"}]
        agent.run_step(task.task_id)
        [second] = agent.get_upcoming_steps(task.task_id)
        [measure] = second.tool_calls or []
        assert measure.tool_kwargs == {"text": "<abc>"}
        assert measure.planned_kwargs == {"text": "$1"}
        with pytest.raises(ToolArgumentsError, match="text"):
            agent.approve_tool_call(
                task.task_id, second.step_id, measure.tool_id, tool_kwargs={"txt": "x"}
            )
        agent.approve_tool_call(
            task.task_id,
            second.step_id,
            measure.tool_id,
            tool_kwargs={"text": "<abcd>"},
        )
        agent.run_step(task.task_id)
        [third] = agent.get_upcoming_steps(task.task_id)
        # a whole "$2" keeps its type; inside a text a result is its text
        assert [c.tool_kwargs for c in third.tool_calls or []] == [
            {"text": "<abc> has 6 chars"}
        ]
        output = agent.run_step(task.task_id)
    assert output.is_last
    assert calls.names() == [
        "search:abc",
        "measure:<abcd>",
        "compose:<abc> has 6 chars",
    ]
    ran = [r.tool_kwargs for r in results(recorder).values()]
    assert ran == [{"query": "abc"}, {"text": "<abcd>"}, {"text": "<abc> has 6 chars"}]


def test_stream_chat_streams_the_answer_not_the_plan() -> None:
    plan = '1. search("a")\n2. join()'
    with ScriptedServer(
        Script(
            rules=[
                planner(plan),
                joiner("Thought: easy\nAction: Finish(the answer (a))"),
            ]
        )
    ) as server:
        agent, _ = make(server, Calls().tools())
        stream = agent.stream_chat("what?")
        pieces = list(stream.response_gen)
    assert "".join(pieces) == stream.response == "the answer (a)"


# --- parameters --------------------------------------------------------------------------------------------


class Retriever:
    def __init__(self, tools: list[BaseTool]) -> None:
        self.tools = tools
        self.queries: list[str] = []

    def retrieve(self, query: str) -> Sequence[BaseTool]:
        self.queries.append(query)
        return self.tools


def test_from_tools_honours_every_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    async def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"sunny in {city}"

    retriever = Retriever([FunctionTool.from_defaults(weather)])
    template = (
        "CUSTOM JOINER. Solve a question answering task.\n{context_str}\nQ: {query_str}"
    )
    script = Script(
        rules=[
            planner('1. weather("Oslo")\n2. join()'),
            joiner("Thought: t\nAction: Finish(sunny)", "CUSTOM JOINER"),
        ]
    )
    with ScriptedServer(script) as server:
        agent, recorder = make(
            server,
            Calls().tools(),
            tool_retriever=retriever,
            planner_example_prompt_str="EXAMPLE PLAN GOES HERE",
            stop=["<STOP>"],
            joiner_prompt=template,
            max_replans=2,
            verbose=True,
        )
        assert agent.chat("weather in Oslo?").response == "sunny"
        plan_request, join_request = server.requests
    worker = agent.agent_worker
    assert isinstance(worker, LLMCompilerAgentWorker) and worker.max_replans == 2
    assert "EXAMPLE PLAN GOES HERE" in plan_request.system_text
    assert (
        "weather(city: string): Today's weather in a city." in plan_request.system_text
    )
    assert plan_request.body["stop"] == ["<STOP>"]
    assert (
        join_request.last_user_text.startswith("CUSTOM JOINER")
        and "Q: weather in Oslo?" in join_request.last_user_text
    )
    assert results(recorder)[1].tool_output.content == "sunny in Oslo"
    assert retriever.queries == ["weather in Oslo?"]
    assert "> Plan (round 1)" in capsys.readouterr().out


def test_constructor_refuses_nonsense() -> None:
    with ScriptedServer(Script()) as server:
        with pytest.raises(ValueError, match="cannot be negative"):
            LLMCompilerAgentWorker.from_tools([], llm=llm_for(server), max_replans=-1)
