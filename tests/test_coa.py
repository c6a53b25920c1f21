"""CoAAgentWorker and CoAAgentPack against the scripted server, through the real openai SDK."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from engine_helpers import Recorder, llm_for, serving

from runs.engine import (
    AgentRunner,
    CoAAgentPack,
    CoAAgentWorker,
    FunctionTool,
    MessageRole,
    StepKind,
    ToolArgumentsError,
    ToolCall,
    ToolCallResult,
    parse_event,
)
from runs.engine.testing import Match, RecordedRequest, Reply, Rule, Timing

REASONING = "do not compute anything a function can compute"
REFINE = "Reasoning with values:"
QUESTION = (
    "Four friends share a 120 dollar hotel and a 45 dollar train. What does each pay?"
)
TRIP_CHAIN = "The trip costs [FUNC add(120, 45) = y1] dollars, so each of four pays [FUNC divide(y1, 4) = y2] dollars."


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


def shout(text: str, times: int = 1) -> str:
    """Repeat a text in capitals."""
    return " ".join([text.upper()] * times)


def tools() -> list[FunctionTool]:
    return [FunctionTool.from_defaults(f) for f in (add, divide, shout)]


def reasoning(text: str, **rule: Any) -> Rule:
    return Rule(
        name="reason",
        match=Match(last_user_contains=REASONING),
        reply=Reply(text=text),
        **rule,
    )


def echo_refine() -> Rule:
    """The refine reply repeats the filled-in chain, so tests see exactly what the model was given."""

    def respond(request: RecordedRequest) -> Reply:
        filled = (
            request.last_user_text.split(REFINE, 1)[1]
            .split("\n\nAnswer:", 1)[0]
            .strip()
        )
        return Reply(text=f"ANSWER: {filled}")

    return Rule(name="refine", match=Match(last_user_contains=REFINE), respond=respond)


def make(
    server: Any, tool_list: list[FunctionTool] | None = None, **worker: Any
) -> tuple[AgentRunner, Recorder]:
    recorder = Recorder()
    coa = CoAAgentWorker.from_tools(
        tools=tool_list if tool_list is not None else tools(),
        llm=llm_for(server),
        **worker,
    )
    return AgentRunner(coa, on_event=recorder), recorder


def chat(
    text: str, question: str = QUESTION, tool_list: list[FunctionTool] | None = None
) -> tuple[str, Recorder]:
    with serving(reasoning(text), echo_refine()) as server:
        agent, recorder = make(server, tool_list)
        return agent.chat(question).response, recorder


# --- the method ----------------------------------------------------------------------------------


def test_chain_resolves_in_order_and_refine_sees_values() -> None:
    answer, recorder = chat(TRIP_CHAIN)
    assert (
        answer
        == "ANSWER: The trip costs 165.0 dollars, so each of four pays 41.25 dollars."
    )
    calls = [e for e in recorder.events if isinstance(e, ToolCall)]
    assert [
        (c.output_name, c.depends_on_names, c.plan_index, c.depends_on) for c in calls
    ] == [
        ("y1", [], 1, []),
        ("y2", ["y1"], 2, [1]),
    ]
    assert calls[1].tool_kwargs == {
        "a": 165.0,
        "b": 4,
    }  # the result went in with its type
    results = [e for e in recorder.events if isinstance(e, ToolCallResult)]
    assert [r.output_name for r in results] == ["y1", "y2"]
    assert results[0].ended_at <= results[1].started_at


def test_step_sequence_reasoning_calls_refine() -> None:
    with serving(reasoning(TRIP_CHAIN), echo_refine()) as server:
        agent, recorder = make(server)
        task = agent.create_task(QUESTION)
        first = agent.run_step(task.task_id)
        assert first.output.response == TRIP_CHAIN and not first.is_last
        calls_step = agent.get_upcoming_steps(task.task_id)[0]
        assert calls_step.kind is StepKind.TOOL_CALLS
        # only y1 can run now: y2 waits for its value, and is then shown with it
        assert [
            (c.tool_kwargs, c.plan_index, c.depends_on)
            for c in calls_step.tool_calls or []
        ] == [({"a": 120, "b": 45}, 1, [])]
        second = agent.run_step(task.task_id)
        assert [s.content for s in second.output.sources] == ["165.0"]
        [wave] = agent.get_upcoming_steps(task.task_id)
        assert wave.kind is StepKind.TOOL_CALLS
        # it waits with its place in the DAG (y2 after y1), as it will run
        assert [
            (c.tool_kwargs, c.planned_kwargs, c.plan_index, c.depends_on)
            for c in wave.tool_calls or []
        ] == [({"a": 165.0, "b": 4}, {"a": "y1", "b": 4}, 2, [1])]
        third = agent.run_step(task.task_id)
        assert "165.0" in third.output.response and [
            s.content for s in third.output.sources
        ] == ["41.25"]
        fourth = agent.run_step(task.task_id)
        assert fourth.is_last
    phases = [(e.phase, e.step_id) for e in recorder.of("agent_output")]  # type: ignore[union-attr]
    assert [p for p, _ in phases] == ["reasoning", None]
    streams = recorder.of("agent_stream")
    assert (
        streams
        and "".join(e.delta for e in streams if e.phase == "reasoning") == TRIP_CHAIN
    )  # type: ignore[union-attr]


def test_no_placeholder_means_the_first_reply_is_the_answer() -> None:
    with serving(reasoning("Paris is the capital of France.")) as server:
        agent, recorder = make(server)
        response = agent.chat("What is the capital of France?")
        assert response.response == "Paris is the capital of France."
        assert len(recorder.of("agent_input")) == 1 and not recorder.of("tool_call")
        assert [m.role for m in agent.chat_history] == [
            MessageRole.USER,
            MessageRole.ASSISTANT,
        ]


def test_independent_calls_run_concurrently() -> None:
    """Causal, not timed: the three independent calls overlap (the blocker returns only once
    both lookups have started), and y4 (which needs y1) runs after them, with y1's value: the
    value a person would have been shown for it."""
    spans: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()
    started = {"a": threading.Event(), "b": threading.Event()}

    async def lookup(item: str) -> str:
        """Slow lookup."""
        start = time.time()
        if item in started:
            started[item].set()
        await asyncio.sleep(0.5)
        with lock:
            spans[item] = (start, time.time())
        return item.upper()

    def blocker(item: str) -> str:
        """A blocking call that returns once both lookups have started (or gives up)."""
        start = time.time()
        released = all(event.wait(10) for event in started.values())
        with lock:
            spans[item] = (start, time.time())
        return "released" if released else "waited in vain"

    chain = (
        "[FUNC lookup('a') = y1], [FUNC lookup(\"b\") = y2] and "
        '[FUNC blocker("c") = y3]; together [FUNC lookup(y1) = y4].'
    )
    tool_list = [
        FunctionTool.from_defaults(lookup),
        FunctionTool.from_defaults(blocker),
    ]
    answer, recorder = chat(chain, tool_list=tool_list)
    assert answer == "ANSWER: A, B and released; together A."
    independent = [spans[k] for k in ("a", "b", "c")]
    assert max(s for s, _ in independent) < min(
        e for _, e in independent
    )  # all three overlapped
    assert spans["A"][0] >= spans["a"][1]  # y4 waited for y1
    [y4] = [
        e for e in recorder.events if isinstance(e, ToolCall) and e.output_name == "y4"
    ]
    assert y4.tool_kwargs == {"item": "A"} and y4.depends_on_names == ["y1"]


def test_y1_never_matches_inside_y10() -> None:
    parts = [f"[FUNC add({n}, 0) = y{n}]" for n in range(1, 11)]
    chain = " ".join(parts) + " So y1 and y10 differ, y1 y10."
    answer, _ = chat(chain)
    assert answer.endswith("So 1.0 and 10.0 differ, 1.0 10.0.")
    assert answer.startswith("ANSWER: 1.0 2.0 3.0")


def test_quoted_and_unquoted_references_and_quoted_output() -> None:
    chain = (
        '[FUNC add(1, 2) = y1] [FUNC add("y1", y1) = "y2"] [FUNC add(\'y2\', 1) = y3]'
    )
    answer, _ = chat(chain)
    assert answer == "ANSWER: 3.0 6.0 7.0"


def test_quotes_and_commas_inside_strings() -> None:
    chain = "[FUNC shout(\"a, b (c) [d] = y9 \\\"q\\\"\", 2) = y1] then [FUNC shout('it''s, ok') = y2]"
    answer, recorder = chat(chain)
    calls = [e for e in recorder.events if isinstance(e, ToolCall)]
    assert calls[0].tool_kwargs == {"text": 'a, b (c) [d] = y9 "q"', "times": 2}
    assert calls[1].tool_kwargs == {"text": "its, ok"}
    assert answer.startswith(
        'ANSWER: A, B (C) [D] = Y9 "Q" A, B (C) [D] = Y9 "Q" then ITS, OK'
    )


def test_keyword_arguments_and_nested_references() -> None:
    chain = '[FUNC add(a=2, b=3) = y1] [FUNC shout(text="x", times=y1) = y2]'
    answer, _ = chat(
        chain,
        tool_list=[
            FunctionTool.from_defaults(add),
            FunctionTool.from_defaults(
                lambda text, times=1: text * int(times), name="shout"
            ),
        ],
    )
    assert answer == "ANSWER: 5.0 xxxxx"


# --- bad input: an error value in the filled-in chain, never a crash or a hang ----------------------


@pytest.mark.parametrize(
    ("chain", "expected"),
    [
        ("[FUNC nope(1) = y1] done", "there is no function named 'nope'"),
        ("[FUNC add(1, 2, 3) = y1] done", "at most 2 positional arguments"),
        ("[FUNC add(1) = y1] done", "add() is missing argument(s) b"),
        ("[FUNC add(1, c=2) = y1] done", "unexpected argument(s) c"),
        ('[FUNC add("one", 2) = y1] done', "do not fit its schema"),
        ("[FUNC add(y7, 2) = y1] done", "y1 uses y7, which no placeholder computes"),
        ("[FUNC add(y1, 2) = y1] done", "y1 uses its own result"),
        ("[FUNC add(y2, 1) = y1] [FUNC add(y1, 1) = y2] done", "part of a cycle"),
        ("[FUNC add(1, 2) y1] done", "is not followed by '= yN]'"),
        ("[FUNC add(1, 2 = y1] done", "add(...) is not followed by '= yN]'"),
        ("[FUNC add(1, (2 = y1\n done", "never closed"),
        ("[FUNC = y1] done", "names no function call"),
        ("[FUNC add(1, banana) = y1] done", "cannot read the argument 'banana'"),
        (
            "[FUNC add(1, 2) = y1] [FUNC add(3, 4) = y1] done",
            "y1 is already the result of an earlier placeholder",
        ),
    ],
)
def test_bad_placeholders_become_error_values(chain: str, expected: str) -> None:
    answer, _ = chat(chain)
    assert expected in answer, answer
    assert answer.endswith(" done")


def test_a_failure_reaches_the_calls_that_use_it() -> None:
    answer, recorder = chat(
        "[FUNC divide(1, 0) = y1] so [FUNC add(y1, 1) = y2] and [FUNC add(2, 2) = y3]. y1!"
    )
    assert "y1 = divide(...) failed: ZeroDivisionError" in answer
    assert "y2 = add(...) failed: not run because y1 (divide) failed" in answer
    assert "and 4.0." in answer and "[y1: no value]!" in answer


def test_a_cycle_never_hangs() -> None:
    with serving(
        reasoning(
            "[FUNC add(y3, 1) = y1] [FUNC add(y1, 1) = y2] [FUNC add(y2, 1) = y3] [FUNC add(y3, 1) = y4]"
        ),
        echo_refine(),
    ) as server:
        agent, _ = make(server)
        response = asyncio.run(asyncio.wait_for(agent.achat(QUESTION), timeout=10))
    for n, uses in ((1, 3), (2, 1), (3, 2)):
        assert (
            f"[y{n} = add(...) failed: y{n} is part of a cycle: it uses y{uses}, which needs y{n}]"
            in response.response
        )
    assert "y4 = add(...) failed: not run because y3" in response.response


# --- memory, the pack, prompts ---------------------------------------------------------------------


def test_memory_grows_by_question_and_answer_per_task() -> None:
    with serving(reasoning(TRIP_CHAIN), echo_refine()) as server:
        agent, recorder = make(server)
        for turn in range(1, 5):
            agent.chat(f"{QUESTION} (turn {turn})")
            history = agent.chat_history
            assert len(history) == 2 * turn
            assert history[-2].content == f"{QUESTION} (turn {turn})"
            assert history[-1].content.startswith("ANSWER: The trip costs 165.0")
        sent = recorder.of("agent_input")[-1].input  # type: ignore[union-attr]
        assert len(sent) == 2 * 3 + 1  # three earlier turns, then the refine prompt


def test_pack_runs_and_exposes_its_modules() -> None:
    with serving(reasoning(TRIP_CHAIN), echo_refine()) as server:
        llm = llm_for(server)
        pack = CoAAgentPack(tools(), llm=llm)
        modules = pack.get_modules()
        assert modules["llm"] is llm and isinstance(
            modules["agent_worker"], CoAAgentWorker
        )
        assert modules["agent"].agent_worker is modules["agent_worker"]
        response = pack.run(QUESTION)
    assert (
        response.response
        == "ANSWER: The trip costs 165.0 dollars, so each of four pays 41.25 dollars."
    )
    assert [m.content for m in modules["agent"].chat_history] == [
        QUESTION,
        response.response,
    ]
    assert [s.content for s in response.sources] == ["165.0", "41.25"]


def test_reasoning_prompt_shows_tools_as_python_stubs() -> None:
    with serving(reasoning("No tools needed.")) as server:
        agent, recorder = make(server)
        agent.chat("hi")
    prompt = recorder.of("agent_input")[0].input[-1].content  # type: ignore[union-attr]
    assert 'def add(a: float, b: float):\n    """Add two numbers."""\n    ...' in prompt
    assert "def shout(text: str, times: Optional[int] = 1):" in prompt
    assert prompt.rstrip().endswith("Question: hi\nAnswer:")


def test_construction_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="needs tools or a tool_retriever"):
        CoAAgentWorker.from_tools(llm=llm_for_nothing())
    with pytest.raises(
        ValueError, match=r"uses \{query\}; it may only use \{functions\}, \{question\}"
    ):
        CoAAgentWorker.from_tools(
            tools(), llm=llm_for_nothing(), reasoning_prompt_template="{query}"
        )


def llm_for_nothing() -> Any:
    from runs.engine import OpenAI

    return OpenAI(
        model="scripted",
        api_base="http://127.0.0.1:9/v1",
        api_key="sk-test",
        max_retries=0,
    )


def test_tool_retriever_supplies_tools() -> None:
    class Retriever:
        def retrieve(self, query: str) -> list[FunctionTool]:
            return tools()

    with serving(reasoning(TRIP_CHAIN), echo_refine()) as server:
        coa = CoAAgentWorker.from_tools(tool_retriever=Retriever(), llm=llm_for(server))
        assert AgentRunner(coa).chat(QUESTION).response.endswith("41.25 dollars.")


# --- a person in the loop ----------------------------------------------------------------------------


def test_edit_reject_and_approve_placeholder_calls() -> None:
    chain = "[FUNC add(120, 45) = y1] each [FUNC divide(y1, 4) = y2] or [FUNC shout('x') = y3]"
    with serving(reasoning(chain), echo_refine()) as server:
        agent, recorder = make(server)
        task = agent.create_task(QUESTION, approve_tool_calls=True)
        agent.run_step(task.task_id)
        step = agent.get_upcoming_steps(task.task_id)[0]
        ids = [
            c.tool_id for c in step.tool_calls or []
        ]  # y1 and y3: y2 needs y1's value
        assert [c.output_name for c in step.tool_calls or []] == ["y1", "y3"]
        agent.approve_tool_call(
            task.task_id, step.step_id, ids[0], tool_kwargs={"a": 100, "b": 60}
        )
        agent.reject_tool_call(task.task_id, step.step_id, ids[1], "no shouting")
        agent.run_step(task.task_id)
        [wave] = agent.get_upcoming_steps(task.task_id)
        [y2] = wave.tool_calls or []
        assert y2.tool_kwargs == {"a": 160.0, "b": 4}  # the edited y1's result
        with pytest.raises(ToolArgumentsError, match="do not fit"):
            agent.approve_tool_call(
                task.task_id,
                wave.step_id,
                y2.tool_id,
                tool_kwargs={"a": 160, "b": "four"},
            )
        # a reference typed into an edit is not a value: the person sees and approves values
        with pytest.raises(ToolArgumentsError, match="do not fit"):
            agent.approve_tool_call(
                task.task_id, wave.step_id, y2.tool_id, tool_kwargs={"a": "y1", "b": 2}
            )
        agent.approve_tool_call(
            task.task_id, wave.step_id, y2.tool_id, tool_kwargs={"a": 160.0, "b": 2}
        )
        agent.run_step(task.task_id)
        final = agent.run_step(task.task_id)
    assert final.output.response == (
        "ANSWER: 160.0 each 80.0 or [y3 = shout(...) failed: rejected by user: no shouting]"
    )
    events = [parse_event(e.model_dump_json()) for e in recorder.events]
    assert sorted(e.output_name or "" for e in events if isinstance(e, ToolCall)) == [
        "y1",
        "y2",
        "y3",
    ]


def test_step_mode_edit_of_a_shown_value_is_what_runs() -> None:
    with serving(reasoning(TRIP_CHAIN), echo_refine()) as server:
        agent, recorder = make(server)
        task = agent.create_task(QUESTION)
        agent.run_step(task.task_id)
        agent.run_step(task.task_id)  # y1
        step = agent.get_upcoming_steps(task.task_id)[0]
        edited = [
            {"tool_id": c.tool_id, "tool_kwargs": c.tool_kwargs}
            for c in step.tool_calls or []
        ]
        assert [e["tool_kwargs"] for e in edited] == [{"a": 165.0, "b": 4}]
        edited[0]["tool_kwargs"] = {"a": 165.0, "b": 165.0}
        import json

        agent.update_step_input(task.task_id, step.step_id, json.dumps(edited))
        agent.run_step(task.task_id)
        final = agent.run_step(task.task_id)
    ran = [e.tool_kwargs for e in recorder.of("tool_call_result")]  # type: ignore[union-attr]
    assert ran == [{"a": 120, "b": 45}, {"a": 165.0, "b": 165.0}]
    assert (
        final.output.response
        == "ANSWER: The trip costs 165.0 dollars, so each of four pays 1.0 dollars."
    )


def test_undo_the_calls_step_and_run_again() -> None:
    with serving(reasoning(TRIP_CHAIN), echo_refine()) as server:
        agent, _ = make(server)
        task = agent.create_task(QUESTION)
        agent.run_step(task.task_id)
        agent.run_step(task.task_id)
        agent.undo_step(task.task_id)
        agent.run_step(task.task_id)  # y1 again
        agent.run_step(task.task_id)  # y2, with y1's value
        final = agent.run_step(task.task_id)
        assert final.is_last
        response = agent.finalize_response(task.task_id)
        assert response.response.endswith("41.25 dollars.")
        assert len(agent.chat_history) == 2


def test_reasoning_stream_arrives_token_by_token() -> None:
    with serving(
        reasoning(TRIP_CHAIN, timing=Timing(token_delay_s=0.001)), echo_refine()
    ) as server:
        agent, recorder = make(server)
        agent.chat(QUESTION)
    deltas = [e for e in recorder.of("agent_stream") if e.phase == "reasoning"]  # type: ignore[union-attr]
    assert len(deltas) > 5


def test_stream_step_streams_the_refined_answer() -> None:
    refine = Rule(
        name="refine",
        match=Match(last_user_contains=REFINE),
        reply=Reply(text="Each pays 41.25 dollars."),
        timing=Timing(token_delay_s=0.02),
    )
    with serving(reasoning(TRIP_CHAIN), refine) as server:
        agent, _ = make(server)
        task = agent.create_task(QUESTION)
        output = agent.stream_step(task.task_id)
        assert not output.is_last  # the reasoning is not the answer
        for _wave in ("y1", "y2"):
            output = agent.stream_step(task.task_id)
            assert not output.is_last
        output = agent.stream_step(task.task_id)
        assert output.is_last
        pieces = list(output.output.response_gen)  # type: ignore[attr-defined]
        response = agent.finalize_response(task.task_id, output)
    assert (
        len(pieces) > 2
        and "".join(pieces) == response.response == "Each pays 41.25 dollars."
    )


def test_callback_manager_hears_the_chain() -> None:
    from runs.engine.callbacks import BaseCallbackHandler, CallbackManager

    calls: list[str] = []

    class Handler(BaseCallbackHandler):
        def on_event_start(
            self,
            event_type: Any,
            payload: dict[str, Any] | None = None,
            event_id: str = "",
            parent_id: str = "",
            **kwargs: Any,
        ) -> str:
            if event_type == "function_call" and payload:
                calls.append(payload["event"].output_name)
            return event_id

    with serving(reasoning(TRIP_CHAIN), echo_refine()) as server:
        manager = CallbackManager([Handler()])
        pack = CoAAgentPack(tools(), llm=llm_for(server), callback_manager=manager)
        pack.run(QUESTION)
    assert (
        pack.get_modules()["callback_manager"] is manager is pack.agent.callback_manager
    )
    assert calls == ["y1", "y2"]


def test_verbose_prints_functions_chain_and_filled_chain(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(reasoning(TRIP_CHAIN), echo_refine()) as server:
        agent, _ = make(server, verbose=True)
        agent.chat(QUESTION)
    printed = capsys.readouterr().out
    assert "def divide(a: float, b: float):" in printed
    assert f"> Chain:\n{TRIP_CHAIN}" in printed
    assert "> Filled in:\nThe trip costs 165.0 dollars" in printed
