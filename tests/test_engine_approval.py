"""Tool-call approval: approve, edit, reject per call; schema-checked edits; undo restores the calls."""

from __future__ import annotations

import json

import pytest
from engine_helpers import make_agent, serving

from runs.engine import (
    FunctionTool,
    StepKind,
    StepNotEditableError,
    ToolArgumentsError,
    ToolCallDecision,
    UnknownStepError,
)
from runs.engine.testing import Match, Reply, Rule, ToolCallSpec

received: list[tuple[str, dict[str, object]]] = []


def lookup(city: str) -> str:
    """Population of a city."""
    received.append(("lookup", {"city": city}))
    return f"{city}: 1000"


def convert(amount: float, currency: str) -> str:
    """Convert an amount."""
    received.append(("convert", {"amount": amount, "currency": currency}))
    return f"{amount} {currency}"


def delete_rows(table: str) -> str:
    """Delete rows (dangerous)."""
    received.append(("delete_rows", {"table": table}))
    return "deleted"


TOOLS = [FunctionTool.from_defaults(fn) for fn in (lookup, convert, delete_rows)]

RULES = [
    Rule(
        match=Match(tool_results_since_user=0),
        reply=Reply(
            tool_calls=[
                ToolCallSpec(name="lookup", arguments={"city": "Lagos"}, id="c1"),
                ToolCallSpec(
                    name="convert", arguments={"amount": 5, "currency": "EUR"}, id="c2"
                ),
                ToolCallSpec(name="delete_rows", arguments={"table": "sales"}, id="c3"),
            ]
        ),
    ),
    Rule(match=Match(tool_results_since_user=3), reply=Reply(text="Done.")),
]


@pytest.fixture(autouse=True)
def _clear() -> None:
    received.clear()


def _pending(agent, task_id):  # type: ignore[no-untyped-def]
    step = agent.get_upcoming_steps(task_id)[0]
    assert step.kind is StepKind.TOOL_CALLS
    return step


def test_approve_edit_reject() -> None:
    with serving(*RULES) as server:
        agent, recorder = make_agent(server, tools=TOOLS)
        task = agent.create_task("go", approve_tool_calls=True)
        first = agent.run_step(task.task_id)
        assert received == []  # nothing ran: the calls wait for a person
        step = _pending(agent, task.task_id)
        assert first.next_steps[0].step_id == step.step_id
        assert [c.tool_name for c in step.tool_calls] == [
            "lookup",
            "convert",
            "delete_rows",
        ]
        assert json.loads(step.input)[1]["tool_kwargs"] == {
            "amount": 5,
            "currency": "EUR",
        }

        agent.approve_tool_call(task.task_id, step.step_id, "c1")
        agent.update_step_input(
            task.task_id,
            step.step_id,
            json.dumps(
                [{"tool_id": "c2", "tool_kwargs": {"amount": 7.5, "currency": "USD"}}]
            ),
        )
        agent.reject_tool_call(
            task.task_id, step.step_id, "c3", "never delete production data"
        )
        agent.run_step(task.task_id)
        final = agent.run_step(task.task_id)
        sent = server.requests[-1].messages
    assert final.is_last and final.output.response == "Done."
    assert received == [
        ("lookup", {"city": "Lagos"}),
        ("convert", {"amount": 7.5, "currency": "USD"}),
    ]
    tool_messages = {
        m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"
    }
    assert tool_messages["c3"] == "rejected by user: never delete production data"
    assert tool_messages["c2"] == "7.5 USD"
    decided = recorder.of("tool_call_decided")
    assert [(e.tool_id, e.decision) for e in decided] == [  # type: ignore[union-attr]
        ("c1", ToolCallDecision.APPROVED),
        ("c3", ToolCallDecision.REJECTED),
    ]
    assert recorder.of("step_input_edited")


def test_edit_failing_the_schema_is_refused_with_the_reason() -> None:
    with serving(*RULES) as server:
        agent, _ = make_agent(server, tools=TOOLS)
        task = agent.create_task("go", approve_tool_calls=True)
        agent.run_step(task.task_id)
        step = _pending(agent, task.task_id)
        bad = json.dumps([{"tool_id": "c2", "tool_kwargs": {"amount": "lots"}}])
        with pytest.raises(ToolArgumentsError) as info:
            agent.update_step_input(task.task_id, step.step_id, bad)
        assert "amount" in str(info.value) and "currency" in str(info.value)
        with pytest.raises(ToolArgumentsError):
            agent.update_step_input(task.task_id, step.step_id, "not json")
        with pytest.raises(ToolArgumentsError):
            agent.approve_tool_call(
                task.task_id, step.step_id, "c1", tool_kwargs={"town": "x"}
            )
        with pytest.raises(ToolArgumentsError, match="no tool call with id"):
            agent.update_step_input(
                task.task_id,
                step.step_id,
                json.dumps([{"tool_id": "zz", "tool_kwargs": {}}]),
            )
        with pytest.raises(UnknownStepError):
            agent.reject_tool_call(task.task_id, step.step_id, "zz", "no")
        after = _pending(agent, task.task_id)
    assert after.tool_calls == step.tool_calls  # nothing changed


def test_undo_after_approval_restores_the_pending_calls() -> None:
    with serving(*RULES) as server:
        agent, _ = make_agent(server, tools=TOOLS)
        task = agent.create_task("go", approve_tool_calls=True)
        agent.run_step(task.task_id)
        step = _pending(agent, task.task_id)
        agent.reject_tool_call(task.task_id, step.step_id, "c3", "no")
        before = step.model_copy(deep=True)
        memory_before = agent.get_task(task.task_id).memory.get_all()
        agent.run_step(task.task_id)
        with pytest.raises(StepNotEditableError):
            agent.update_step_input(task.task_id, step.step_id, "[]")
        restored = agent.undo_step(task.task_id)
        again = _pending(agent, task.task_id)
    assert restored.step_id == again.step_id == before.step_id
    assert again.tool_calls == before.tool_calls
    assert [c.decision for c in again.tool_calls] == [
        ToolCallDecision.PENDING,
        ToolCallDecision.PENDING,
        ToolCallDecision.REJECTED,
    ]
    assert agent.get_task(task.task_id).memory.get_all() == memory_before


def test_without_approval_the_calls_run_in_the_same_step() -> None:
    with serving(*RULES) as server:
        agent, _ = make_agent(server, tools=TOOLS)
        task = agent.create_task("go")
        output = agent.run_step(task.task_id)
    assert len(received) == 3
    assert [s.content for s in output.output.sources] == [
        "Lagos: 1000",
        "5.0 EUR",
        "deleted",
    ]
