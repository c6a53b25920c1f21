"""ReActAgentWorker against the scripted server: the text protocol, errors fed back, limits, approval, undo."""

from __future__ import annotations

import json

import pytest
from engine_helpers import SEED_QUESTION, Recorder, arithmetic_tools, llm_for, serving

from runs.engine import (
    ActionReasoningStep,
    AgentRunner,
    ObservationReasoningStep,
    ReActAgentWorker,
    ReActChatFormatter,
    ReActOutputParser,
    ReActParseError,
    ResponseReasoningStep,
    StepKind,
    ToolArgumentsError,
    parse_event,
)
from runs.engine.testing import Match, Reply, Rule, ScriptedServer


def react_agent(
    server: ScriptedServer, **worker_kwargs: object
) -> tuple[AgentRunner, Recorder]:
    recorder = Recorder()
    worker = ReActAgentWorker.from_tools(
        arithmetic_tools(), llm=llm_for(server), **worker_kwargs
    )  # type: ignore[arg-type]
    return AgentRunner(worker, on_event=recorder), recorder


def action(thought: str, tool: str, args: dict[str, object] | str) -> str:
    raw = args if isinstance(args, str) else json.dumps(args)
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {raw}"


def seed_react_rules() -> list[Rule]:
    return [
        Rule(
            name="multiply",
            match=Match(last_message_contains=SEED_QUESTION),
            reply=Reply(
                text=action("First the product.", "multiply", {"a": 121, "b": 3})
            ),
        ),
        Rule(
            name="add",
            match=Match(last_message_regex=r"^Observation: 363$"),
            reply=Reply(text=action("Now add 42.", "add", {"a": 363, "b": 42})),
        ),
        Rule(
            name="answer",
            match=Match(last_message_regex=r"^Observation: 405$"),
            reply=Reply(
                text="Thought: I can answer without using any more tools.\nAnswer: (121 * 3) + 42 = 405"
            ),
        ),
    ]


def run_to_end(agent: AgentRunner, task_id: str, limit: int = 20) -> None:
    for _ in range(limit):
        if agent.run_step(task_id).is_last:
            return
    raise AssertionError("the task did not finish")


def test_seed_arithmetic_streams_and_keeps_structured_reasoning() -> None:
    with serving(*seed_react_rules()) as server:
        agent, recorder = react_agent(server)
        task = agent.create_task(SEED_QUESTION)
        first = agent.run_step(task.task_id)
        assert not first.is_last
        assert (
            first.output.sources[0].content == "363"
        )  # one model call and its tool call per step
        assert len(server.requests) == 1
        run_to_end(agent, task.task_id)
        response = agent.finalize_response(task.task_id)

        assert (
            response.response == "(121 * 3) + 42 = 405"
        )  # the text after Answer:, no Thought line
        assert [s.content for s in response.sources] == ["363", "405"]
        assert [r.rule_name for r in server.requests] == ["multiply", "add", "answer"]
        # the protocol is text: no tools are sent to the model, they are described in the system prompt
        assert all(not r.tools for r in server.requests)
        assert "multiply(a: integer, b: integer)" in server.requests[0].system_text
        assert server.requests[2].messages[-1] == {
            "role": "user",
            "content": "Observation: 405",
        }

        parts = [e.part for e in recorder.of("agent_reasoning")]  # type: ignore[attr-defined]
        assert [p.kind for p in parts] == [
            "action",
            "observation",
            "action",
            "observation",
            "response",
        ]
        assert parts[0] == ActionReasoningStep(
            thought="First the product.",
            action="multiply",
            action_input={"a": 121, "b": 3},
        )
        assert parts[1] == ObservationReasoningStep(
            observation="363", tool_name="multiply"
        )
        assert (
            isinstance(parts[4], ResponseReasoningStep)
            and parts[4].response == "(121 * 3) + 42 = 405"
        )
        # events round-trip through JSON (what the database and the websocket carry)
        assert (
            parse_event(recorder.of("agent_reasoning")[0].model_dump_json())
            == recorder.of("agent_reasoning")[0]
        )
        # tokens stream: each model call arrives in several deltas that add up to the reply
        streams = [
            e
            for e in recorder.of("agent_stream")
            if e.step_id == first.task_step.step_id
        ]
        assert len(streams) > 3
        assert "".join(e.delta for e in streams) == action(
            "First the product.", "multiply", {"a": 121, "b": 3}
        )  # type: ignore[attr-defined]
        # the agent's memory keeps the conversation, not the scratchpad
        assert [(m.role.value, m.content) for m in agent.chat_history] == [
            ("user", SEED_QUESTION),
            ("assistant", "(121 * 3) + 42 = 405"),
        ]


def test_chat_runs_the_whole_task() -> None:
    with serving(*seed_react_rules()) as server:
        agent, _ = react_agent(server)
        assert str(agent.chat(SEED_QUESTION)) == "(121 * 3) + 42 = 405"


def test_malformed_reply_invented_tool_and_bad_arguments_are_fed_back() -> None:
    # first match wins: the more specific error texts come first (every error observation
    # says "could not read your reply" or names the problem)
    rules = [
        Rule(
            name="fixed",
            match=Match(last_message_contains="not valid JSON"),
            reply=Reply(text=action("Fixed.", "multiply", {"a": 121, "b": 3})),
        ),
        Rule(
            name="bad-json",
            match=Match(last_message_contains="do not fit its schema"),
            reply=Reply(text=action("Fix the arguments.", "multiply", "{a: 121, b: 3")),
        ),
        Rule(
            name="bad-args",
            match=Match(last_message_contains="there is no tool named 'power'"),
            reply=Reply(
                text=action("Multiply then.", "multiply", {"a": "many", "b": 3})
            ),
        ),
        Rule(
            name="invented",
            match=Match(last_message_contains="could not read your reply"),
            reply=Reply(text=action("Use power instead.", "power", {"a": 121, "b": 3})),
        ),
        Rule(
            name="malformed",
            match=Match(last_message_contains=SEED_QUESTION),
            reply=Reply(text="Thought: multiply first\nAction: multiply"),
        ),
        *seed_react_rules()[1:],
    ]
    with serving(*rules) as server:
        agent, recorder = react_agent(server)
        task = agent.create_task(SEED_QUESTION)
        run_to_end(agent, task.task_id)
        assert agent.finalize_response(task.task_id).response == "(121 * 3) + 42 = 405"
        assert [r.rule_name for r in server.requests] == [
            "malformed",
            "invented",
            "bad-args",
            "bad-json",
            "fixed",
            "add",
            "answer",
        ]
        errors = [
            e.part
            for e in recorder.of("agent_reasoning")
            if e.part.kind == "observation" and e.part.is_error
        ]  # type: ignore[attr-defined]
        assert len(errors) == 4
        assert "has no Action Input line" in errors[0].observation
        assert "Available tools: multiply, add" in errors[1].observation
        assert "a: Input should be a valid integer" in errors[2].observation
        assert "not valid JSON" in errors[3].observation
        assert not recorder.of("step_failed")


def test_max_iterations_counts_model_calls_and_ends_with_a_message() -> None:
    forever = Rule(
        name="again", reply=Reply(text=action("Once more.", "add", {"a": 1, "b": 1}))
    )
    with serving(forever) as server:
        agent, _ = react_agent(server, max_iterations=3)
        task = agent.create_task("loop")
        outputs = [agent.run_step(task.task_id) for _ in range(3)]
        assert [o.is_last for o in outputs] == [False, False, True]
        assert len(server.requests) == 3
        message = agent.finalize_response(task.task_id).response
        assert message.startswith(
            "Stopped: the agent reached max_iterations=3 model calls without giving an Answer."
        )
        assert "Action: add" in message
        assert agent.chat_history[-1].content == message


def test_unparseable_replies_count_against_max_iterations() -> None:
    with serving(Rule(name="nonsense", reply=Reply(text="Thought: hmm"))) as server:
        agent, _ = react_agent(server, max_iterations=2)
        response = agent.chat("anything")
        assert "max_iterations=2" in response.response
        assert len(server.requests) == 2


def test_approval_edit_reject_and_approve() -> None:
    rules = [
        *seed_react_rules()[:1],
        Rule(
            name="add-after-edit",
            match=Match(last_message_regex=r"^Observation: 484$"),
            reply=Reply(text=action("Now add 42.", "add", {"a": 484, "b": 42})),
        ),
        Rule(
            name="after-reject",
            match=Match(last_message_contains="rejected by user: add 10 instead"),
            reply=Reply(text=action("Add 10 then.", "add", {"a": 484, "b": 10})),
        ),
        Rule(
            name="answer",
            match=Match(last_message_regex=r"^Observation: 494$"),
            reply=Reply(text="Thought: done\nAnswer: 494"),
        ),
    ]
    with serving(*rules) as server:
        agent, recorder = react_agent(server)
        task = agent.create_task(SEED_QUESTION, approve_tool_calls=True)
        agent.run_step(task.task_id)
        pending = agent.get_upcoming_steps(task.task_id)[0]
        assert pending.kind is StepKind.TOOL_CALLS
        call = pending.tool_calls[0]
        assert (call.tool_name, call.tool_kwargs) == ("multiply", {"a": 121, "b": 3})
        assert not recorder.of("tool_call")  # nothing ran before a person decided

        with pytest.raises(ToolArgumentsError):
            agent.approve_tool_call(
                task.task_id,
                pending.step_id,
                call.tool_id,
                tool_kwargs={"a": "x", "b": 4},
            )
        agent.approve_tool_call(
            task.task_id, pending.step_id, call.tool_id, tool_kwargs={"a": 121, "b": 4}
        )
        ran = agent.run_step(task.task_id)
        assert ran.output.sources[0].content == "484"

        agent.run_step(task.task_id)  # the model asks for add(484, 42)
        pending = agent.get_upcoming_steps(task.task_id)[0]
        agent.reject_tool_call(
            task.task_id,
            pending.step_id,
            pending.tool_calls[0].tool_id,
            "add 10 instead",
        )
        agent.run_step(task.task_id)
        agent.run_step(task.task_id)  # the model proposes add(484, 10)
        pending = agent.get_upcoming_steps(task.task_id)[0]
        agent.update_step_input(
            task.task_id,
            pending.step_id,
            json.dumps(
                [
                    {
                        "tool_id": pending.tool_calls[0].tool_id,
                        "tool_kwargs": {"a": 484, "b": 10},
                    }
                ]
            ),
        )
        agent.run_step(task.task_id)  # approved by running it
        assert agent.run_step(task.task_id).is_last
        assert agent.finalize_response(task.task_id).response == "494"
        assert [r.rule_name for r in server.requests] == [
            "multiply",
            "add-after-edit",
            "after-reject",
            "answer",
        ]
        observations = [
            e.part.observation
            for e in recorder.of("agent_reasoning")
            if e.part.kind == "observation"
        ]  # type: ignore[attr-defined]
        assert observations == ["484", "rejected by user: add 10 instead", "494"]


def test_undo_restores_the_reasoning_exactly_and_reruns() -> None:
    with serving(*seed_react_rules()) as server:
        agent, _ = react_agent(server)
        task = agent.create_task(SEED_QUESTION)
        agent.run_step(task.task_id)
        before = agent.get_task_state(task.task_id).model_dump(mode="json")
        agent.run_step(task.task_id)
        agent.undo_step(task.task_id)
        after = agent.get_task_state(task.task_id).model_dump(mode="json")
        assert after["task"]["extra_state"] == before["task"]["extra_state"]
        assert after["task"]["memory"] == before["task"]["memory"]
        assert [s["step_id"] for s in after["step_queue"]] == [
            s["step_id"] for s in before["step_queue"]
        ]
        run_to_end(agent, task.task_id)
        assert agent.finalize_response(task.task_id).response == "(121 * 3) + 42 = 405"
        reasoning = agent.get_task(task.task_id).extra_state["current_reasoning"]
        assert [p["kind"] for p in reasoning] == [
            "action",
            "observation",
            "action",
            "observation",
            "response",
        ]


def test_feedback_on_a_continuation_step_reaches_the_model_as_an_observation() -> None:
    rules = [
        *seed_react_rules()[:1],
        Rule(
            name="feedback",
            match=Match(last_message_contains="The user says: use 4 not 3"),
            reply=Reply(text="Thought: ok\nAnswer: 526"),
        ),
    ]
    with serving(*rules) as server:
        agent, _ = react_agent(server)
        task = agent.create_task(SEED_QUESTION)
        agent.run_step(task.task_id)
        assert agent.run_step(task.task_id, input="use 4 not 3").is_last
        assert server.requests[-1].rule_name == "feedback"


def test_tool_retriever_picks_the_tools_per_task() -> None:
    class OnlyMultiply:
        def retrieve(self, query: str) -> list[object]:
            return [t for t in arithmetic_tools() if t.metadata.name == "multiply"]

    with serving(*seed_react_rules()) as server:
        worker = ReActAgentWorker.from_tools(
            tool_retriever=OnlyMultiply(), llm=llm_for(server)
        )  # type: ignore[arg-type]
        agent = AgentRunner(worker)
        task = agent.create_task(SEED_QUESTION)
        agent.run_step(task.task_id)
        agent.run_step(
            task.task_id
        )  # the model asks for add, which this task was not given
        system = server.requests[0].system_text
        assert "multiply(" in system and "add(" not in system
        observation = agent.get_task(task.task_id).extra_state["current_reasoning"][-1]
        assert "there is no tool named 'add'" in observation["observation"]
    with pytest.raises(ValueError, match="both tools and tool_retriever"):
        ReActAgentWorker.from_tools(
            arithmetic_tools(), tool_retriever=OnlyMultiply(), llm=llm_for(server)
        )  # type: ignore[arg-type]


def test_verbose_prints_each_part(capsys: pytest.CaptureFixture[str]) -> None:
    with serving(*seed_react_rules()) as server:
        agent, _ = react_agent(server, verbose=True)
        agent.chat(SEED_QUESTION)
    printed = capsys.readouterr().out
    assert (
        "Action: multiply" in printed
        and "Observation: 363" in printed
        and "Answer: (121 * 3) + 42 = 405" in printed
    )


def test_custom_formatter_and_parser_are_used() -> None:
    class ShoutingParser(ReActOutputParser):
        def parse(
            self, output: str, is_streaming: bool = False
        ) -> ResponseReasoningStep:  # type: ignore[override]
            return ResponseReasoningStep(thought="", response=output.upper())

    formatter = ReActChatFormatter.from_defaults(
        system_header="Tools: {tool_names}. {tool_desc}", context="Be brief."
    )
    with serving(Rule(reply=Reply(text="fine"))) as server:
        worker = ReActAgentWorker.from_tools(
            arithmetic_tools(),
            llm=llm_for(server),
            react_chat_formatter=formatter,
            output_parser=ShoutingParser(),
        )
        assert str(AgentRunner(worker).chat("hi")) == "FINE"
        assert server.requests[0].system_text.startswith("Tools: multiply, add.")
        assert "Be brief." in server.requests[0].system_text


# --- the parser on its own ---------------------------------------------------------------------------


def test_parser_reads_actions_answers_and_implicit_answers() -> None:
    parser = ReActOutputParser()
    step = parser.parse(
        'Thought: go\nAction: `add`\nAction Input: ```json\n{"a": 1, "b": {"c": 2}}\n```'
    )
    assert step == ActionReasoningStep(
        thought="go", action="add", action_input={"a": 1, "b": {"c": 2}}
    )
    answer = parser.parse("Thought: done\nAnswer: It is 4.\nSecond line.")
    assert (
        isinstance(answer, ResponseReasoningStep)
        and answer.response == "It is 4.\nSecond line."
    )
    implicit = parser.parse("Just 4.")
    assert (
        isinstance(implicit, ResponseReasoningStep) and implicit.response == "Just 4."
    )
    # an Observation the model made up is not part of its step
    invented = parser.parse(
        'Thought: t\nAction: add\nAction Input: {"a": 1, "b": 2}\nObservation: 3\nThought: x\nAnswer: 3'
    )
    assert isinstance(invented, ActionReasoningStep)
    for bad in (
        "Thought: only thinking",
        "Thought: t\nAction: add",
        "Thought: t\nAction: add\nAction Input: [1, 2]",
        "Action:\nAction Input: {}",
    ):
        with pytest.raises(ReActParseError):
            parser.parse(bad)
    # nested past the decoder's recursion, or past what may be stored: the model is told
    for depth in (50_000, 500):
        nested = '{"a": ' + "[" * depth + "]" * depth + "}"
        with pytest.raises(ReActParseError, match="nested more than 100 levels deep"):
            parser.parse(f"Thought: t\nAction: add\nAction Input: {nested}")
