"""runs.agui.translate on its own: tokens that go missing or come late, calls shown once, state."""

from __future__ import annotations

from typing import Any

from ag_ui_validate.pytest_plugin import assert_valid_agui

from runs.agui.translate import RunTranslator, state_patch


def wire(events: list[Any]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json", by_alias=True) for e in events]


def text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def token(delta: str) -> dict[str, Any]:
    return {"type": "agent_stream", "step_id": "s1", "delta": delta}


def test_tokens_the_layer_lost_come_with_the_reply_and_late_ones_are_dropped() -> None:
    run = RunTranslator("t", "r")
    out = run.run_started()
    out += run.stored({"type": "step_started", "step_id": "s1"})
    out += run.stored({"type": "agent_input", "step_id": "s1"})
    out += run.streamed(token("Hel"))  # "lo, " never arrived
    reply = {"role": "assistant", "content": "Hello, world"}
    out += run.stored({"type": "agent_output", "step_id": "s1", "response": reply})
    out += run.streamed(token("lo, "))  # a late copy, after the message ended
    out += run.stored({"type": "step_completed", "step_id": "s1"})
    out += run.finished()
    events = wire(out)
    assert text(events) == "Hello, world", "each character once, in order"
    assert_valid_agui(events, max_warnings=0)


def test_a_reply_whose_streamed_text_differs_is_not_patched_up_with_a_wrong_suffix() -> (
    None
):
    run = RunTranslator("t", "r")
    out = run.run_started()
    out += run.stored({"type": "agent_input", "step_id": "s1"})
    out += run.streamed(token("Hi"))
    reply = {"role": "assistant", "content": "Hello"}
    out += run.stored({"type": "agent_output", "step_id": "s1", "response": reply})
    out += run.finished()
    events = wire(out)
    assert text(events) == "Hi", "no suffix can make 'Hi' into 'Hello'"
    assert [e["type"] for e in events].count("TEXT_MESSAGE_END") == 1


def test_a_call_is_started_once_with_its_proposal_and_its_result_follows() -> None:
    run = RunTranslator("t", "r")
    call = {"tool_id": "c1", "tool_name": "add", "tool_kwargs": {"a": 1}}
    reply = {"role": "assistant", "content": ""}
    out = run.run_started()
    out += run.stored(
        {
            "type": "agent_output",
            "step_id": "s1",
            "response": reply,
            "tool_calls": [call],
        }
    )
    out += run.stored({"type": "tool_call", "step_id": "s2", **call})
    out += run.stored(
        {
            "type": "tool_call_result",
            "step_id": "s2",
            **call,
            "tool_output": {"content": "2", "tool_name": "add"},
        }
    )
    out += run.finished()
    events = wire(out)
    kinds = [e["type"] for e in events]
    assert kinds.count("TOOL_CALL_START") == 1 and "TEXT_MESSAGE_START" not in kinds
    assert events[-2]["type"] == "TOOL_CALL_RESULT" and events[-2]["content"] == "2"
    assert_valid_agui(events, max_warnings=0)


def test_state_deltas_are_patches_from_what_the_client_has() -> None:
    assert state_patch({"a": 1, "b/c": 2}, {"a": 1, "d": [1]}) == [
        {"op": "remove", "path": "/b~1c"},
        {"op": "add", "path": "/d", "value": [1]},
    ]
    run = RunTranslator("t", "r")
    out = run.run_started()
    out += run.stored({"type": "state_changed", "state": {"plan": "x"}})
    out += run.stored({"type": "state_changed", "state": {"plan": "x", "n": 2}})
    out += run.stored({"type": "state_changed", "state": {"plan": "x", "n": 2}})
    events = wire(out + run.finished())
    assert [e["type"] for e in events[1:3]] == ["STATE_SNAPSHOT", "STATE_DELTA"]
    assert events[2]["delta"] == [{"op": "add", "path": "/n", "value": 2}]
    assert "STATE_DELTA" not in [e["type"] for e in events[3:]], "no empty patches"
    assert_valid_agui(events, max_warnings=0)


def test_after_a_gap_in_the_tokens_the_reply_brings_the_rest_whole() -> None:
    run = RunTranslator("t", "r")
    out = run.run_started()
    out += run.stored({"type": "agent_input", "step_id": "s1"})
    out += run.streamed(token("Hel"), offset=0)
    out += run.streamed(token("world"), offset=7)  # "lo, " (offset 3) was lost
    out += run.streamed(token("!"), offset=12)
    reply = {"role": "assistant", "content": "Hello, world!"}
    out += run.stored({"type": "agent_output", "step_id": "s1", "response": reply})
    # the next model call of the step streams again from its start
    out += run.stored({"type": "agent_input", "step_id": "s1"})
    out += run.streamed(token("Bye"), offset=0)
    reply = {"role": "assistant", "content": "Bye"}
    out += run.stored({"type": "agent_output", "step_id": "s1", "response": reply})
    events = wire(out + run.finished())
    contents = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert contents == ["Hel", "lo, world!", "Bye"]
    assert_valid_agui(events, max_warnings=0)


def test_a_call_joined_mid_stream_sends_its_text_whole() -> None:
    run = RunTranslator("t", "r")
    out = run.run_started()
    out += run.stored({"type": "step_started", "step_id": "s1"})
    out += run.streamed(token("rld"), offset=9)  # "Hello, wo" streamed before the run
    reply = {"role": "assistant", "content": "Hello, world"}
    out += run.stored({"type": "agent_output", "step_id": "s1", "response": reply})
    events = wire(out + run.finished())
    assert text(events) == "Hello, world"
    assert_valid_agui(events, max_warnings=0)


def test_a_call_stop_left_running_is_told_as_a_custom_event() -> None:
    run = RunTranslator("t", "r")
    call = {"tool_id": "c1", "tool_name": "archive_report", "tool_kwargs": {}}
    out = run.run_started()
    out += run.stored({"type": "step_started", "step_id": "s1"})
    out += run.stored({"type": "tool_call", "step_id": "s1", **call})
    stopped = {
        "type": "tool_call_stopped",
        "step_id": "s1",
        "tool_id": "c1",
        "tool_name": "archive_report",
        "state": "left_running",
    }
    out += run.stored(stopped)
    out += run.stored({"type": "step_interrupted", "step_id": "s1"})
    out += run.finished()
    events = wire(out)
    (custom,) = [e for e in events if e["type"] == "CUSTOM"]
    assert custom["name"] == "agentui.tool_call_stopped"
    assert custom["value"]["state"] == "left_running"
    assert_valid_agui(events, max_warnings=0)


def test_the_note_a_retry_gave_the_model_is_told_as_a_custom_event() -> None:
    run = RunTranslator("t", "r")
    note = {
        "type": "stopped_calls_note",
        "step_id": "s1",
        "text": "Note from the application: ...",
        "calls": [
            {
                "tool_id": "c1",
                "tool_name": "archive_report",
                "tool_kwargs": {"title": "Q3"},
                "state": "left_running",
            }
        ],
    }
    out = run.run_started()
    out += run.stored({"type": "step_started", "step_id": "s1"})
    out += run.stored(note)
    out += run.finished()
    events = wire(out)
    (custom,) = [e for e in events if e["type"] == "CUSTOM"]
    assert custom["name"] == "agentui.stopped_calls_note"
    assert custom["value"]["text"] == note["text"]
    assert custom["value"]["calls"] == note["calls"]
    assert_valid_agui(events, max_warnings=0)


def test_results_go_out_in_their_calls_order_whatever_order_they_finish_in() -> None:
    """The model reads a reply's results in its calls' order; a client puts each result after
    those it has, so one that finishes first (a rejection) waits for the ones before it."""
    run = RunTranslator("t", "r")
    calls = [
        {"tool_id": f"c{i}", "tool_name": "add", "tool_kwargs": {"a": i}}
        for i in (1, 2, 3)
    ]
    reply = {"role": "assistant", "content": ""}
    out = run.run_started()
    out += run.stored({"type": "step_started", "step_id": "s1"})
    out += run.stored(
        {
            "type": "agent_output",
            "step_id": "s1",
            "response": reply,
            "tool_calls": calls,
        }
    )
    for i in (3, 1, 2):
        output = {"content": str(i)}
        out += run.stored(
            {"type": "tool_call_result", **calls[i - 1], "tool_output": output}
        )
    out += run.finished()
    events = wire(out)
    results = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["c1", "c2", "c3"]
    assert_valid_agui(events, max_warnings=0)


def _said(role: str, content: str, msg_id: str) -> Any:
    """A conversation message as the service reads it (runs.service's ConversationMessage)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        id=msg_id,
        role=role,
        content=content,
        images=[],
        tool_calls=[],
        tool_call_id=None,
        cut=None,
    )


def test_an_edited_input_is_snapshotted_even_when_the_step_ran_before_it_was_told() -> (
    None
):
    """The conversation is read when the edit's event is translated; under load the step has
    run by then. The client still gets the edited message, and nothing ahead of its events."""
    run = RunTranslator("t", "r")
    run.messages([_said("user", "Compute please", "u1")])
    out = run.edited_input(
        [
            _said("user", "Compute please, carefully", "u1"),
            _said(
                "assistant", "Let me compute both.", "a1"
            ),  # not told to the client yet
        ]
    )
    events = wire(out)
    assert [e["type"] for e in events] == ["MESSAGES_SNAPSHOT"]
    assert [(m["role"], m["content"]) for m in events[0]["messages"]] == [
        ("user", "Compute please, carefully")
    ]
    # and an edit that changed nothing the client has sends nothing
    assert run.edited_input([_said("user", "Compute please, carefully", "u1")]) == []
