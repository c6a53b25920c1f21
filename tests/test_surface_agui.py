"""What the person sees is what ran, over AG-UI (issue 25): a tools-mode notebook served by
daphne is driven through `POST /agui/` — interrupts answered by `resume` with an edit, a
rejection with a reason and approvals; undone twice and forked over REST (AG-UI has neither),
then edited again and approved over AG-UI — and every tool call the AG-UI streams show (their
TOOL_CALL_ARGS and TOOL_CALL_RESULT, the MESSAGES_SNAPSHOTs' calls) is held against what the
tools ran, the stored audit, and what the scripted model server received.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from browser_helpers import USERNAME, LiveApp
from otlp_collector import Collector
from recorded_tools import executions, ledger_app, spans  # noqa: F401  (fixtures)

from tests import audit_support as audit
from tests.agui_support import outcome, post_live, run_input, sse_events
from tests.rest_support import LiveRest


class Agui:
    """Runs over AG-UI on one live app; every stream kept."""

    def __init__(self, app: LiveApp, token: str) -> None:
        self.url, self.token = app.url, token
        self.streams: list[list[dict[str, Any]]] = []

    def run(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        status, raw = post_live(self.url, self.token, body)
        assert status == 200, raw
        events = sse_events(raw)
        self.streams.append(events)
        return events

    def resume(
        self, thread: str, answer: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Answer every interrupt the thread's last run ended with (`answer` gives a payload)."""
        pending = outcome(self.streams[-1])["interrupts"]
        entries = [
            {"interruptId": i["id"], "status": "resolved", "payload": answer(i)}
            for i in pending
        ]
        return self.run(run_input(thread, resume=entries))


def edit_to(
    tool_id: str, arguments: dict[str, Any]
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Edit call `tool_id` of the step that waits: by its call's interrupt (tools mode) or its
    step's input (a fork runs in step mode)."""

    def answer(interrupt: dict[str, Any]) -> dict[str, Any]:
        if interrupt["reason"] == "tool_call_approval":
            return {"action": "edit", "arguments": arguments}
        assert interrupt["metadata"]["kind"] == "tool_calls", interrupt
        edited = [{"tool_id": tool_id, "tool_kwargs": arguments}]
        return {"action": "edit", "input": json.dumps(edited)}

    return answer


def approve(interrupt: dict[str, Any]) -> dict[str, Any]:
    return {"action": "approve"}


def streamed_runs(streams: list[list[dict[str, Any]]]) -> list[audit.Ran]:
    """The tool calls the AG-UI streams show run: each TOOL_CALL_RESULT with the call's name
    and arguments as a client of that thread has them then. A client keeps a call across its
    thread's runs (a resume does not start it again), takes its arguments from TOOL_CALL_ARGS,
    and takes them anew from a MESSAGES_SNAPSHOT (how an edited call is told)."""
    calls: dict[
        str, dict[str, tuple[str, str]]
    ] = {}  # thread -> call id -> (name, args)
    runs = []
    for stream in streams:
        thread = next(e["threadId"] for e in stream if e["type"] == "RUN_STARTED")
        known = calls.setdefault(thread, {})
        for e in stream:
            if e["type"] == "MESSAGES_SNAPSHOT":
                for m in e["messages"]:
                    for c in m.get("toolCalls") or []:
                        function = c["function"]
                        known[c["id"]] = (function["name"], function["arguments"])
            elif e["type"] == "TOOL_CALL_START" and e["toolCallId"] not in known:
                known[e["toolCallId"]] = (e["toolCallName"], "")
            elif e["type"] == "TOOL_CALL_ARGS":
                name, arguments = known[e["toolCallId"]]
                known[e["toolCallId"]] = (name, arguments + e["delta"])
            elif e["type"] == "TOOL_CALL_RESULT":
                tool_id = e["toolCallId"]
                name, arguments = known[tool_id]
                runs.append(
                    audit.Ran(tool_id, name, audit.canonical(arguments), e["content"])
                )
    return runs


def test_what_agui_streams_is_what_ran_and_what_is_stored(
    ledger_app: LiveApp, spans: Collector, tmp_path: Path
) -> None:
    token = ledger_app.api_token("surface")
    api, agui = LiveRest(ledger_app.url, token), Agui(ledger_app, token)
    thread = "surface-agui"
    agui.run(
        run_input(thread, audit.LEDGER_QUESTION, agent="function_calling", mode="tools")
    )

    def first(interrupt: dict[str, Any]) -> dict[str, Any]:
        if interrupt["toolCallId"] == "call_add":
            return {"action": "edit", "arguments": audit.EDITED_ADD}
        return {"action": "reject", "reason": audit.REJECTION}

    agui.resume(thread, first)
    assert outcome(agui.resume(thread, approve)) == {"type": "success"}
    (notebook,) = api.every("/notebooks/")
    pk = notebook["id"]
    api.post(f"/notebooks/{pk}/undo", {})
    api.settled(pk)
    api.post(f"/notebooks/{pk}/undo", {})
    api.settled(pk)
    agui.run(run_input(thread))  # no message: the run reports what waits
    assert (
        outcome(agui.resume(thread, edit_to("call_dbl", audit.EDITED_DOUBLE)))["type"]
        == "success"
    )

    double = next(
        s
        for s in api.every(f"/notebooks/{pk}/steps/")
        if s["kind"] == "tool_calls" and s["tool_calls"][0]["tool_id"] == "call_dbl"
    )
    fork = api.post(f"/notebooks/{pk}/fork", {"step_id": double["prev_steps"][0]}, 201)
    copied = fork["last_seq"]
    agui.run(run_input(str(fork["id"])))
    agui.resume(str(fork["id"]), edit_to("call_dbl", audit.FORK_DOUBLE))
    while outcome(agui.streams[-1])["type"] == "interrupt":
        agui.resume(str(fork["id"]), approve)
    assert outcome(agui.streams[-1]) == {"type": "success"}
    assert agui.streams[-1][-1]["result"] == audit.LEDGER_ANSWER

    events = {
        nb: [e["event"] for e in api.every(f"/notebooks/{nb}/events/")]
        for nb in (pk, fork["id"])
    }
    own = events[pk] + events[fork["id"]][copied:]
    ran = executions(tmp_path / "tools.jsonl")
    assert sorted(map(audit.canonical, ran)) == sorted(
        map(audit.canonical, audit.ledger_executions())
    )
    problems = audit.wire_problems(ledger_app.model.requests, own, ran)
    # the exported telemetry: one TOOL span per run, with the arguments that ran
    exported = spans.wait_for("TOOL", len(audit.results_in(own)))
    problems += audit.telemetry_problems(exported, own)
    problems += audit.approval_problems(events[pk]) + audit.approval_problems(
        events[fork["id"]]
    )
    assert not problems, "\n".join(problems)

    # every call AG-UI showed run is one the tools ran, as stored, and none is missing
    audited = set(audit.results_in(own))
    streamed = streamed_runs(agui.streams)
    assert len(streamed) == len(audited) and set(streamed) == audited
    # the conversation a client rebuilds from MESSAGES_SNAPSHOT shows the calls as they ran
    for stream in agui.streams:
        for e in stream:
            if e["type"] == "MESSAGES_SNAPSHOT":
                assert audit.shown_in(e["messages"]) <= audited
    # the decisions streamed as CUSTOM agentui.human_action are the stored ones (but the undos,
    # made over REST while no AG-UI run streamed)
    decided = [
        {**e["value"], "type": "human_action"}
        for stream in agui.streams
        for e in stream
        if e["type"] == "CUSTOM" and e["name"] == "agentui.human_action"
    ]
    stored = [a for a in audit.human_actions(own) if a[0] != "undone"]
    assert audit.human_actions(decided) == stored
    assert stored[:2] == [
        (
            "edited_arguments",
            USERNAME,
            "call_add",
            {"a": 2, "b": 3},
            audit.EDITED_ADD,
            None,
        ),
        ("rejected_call", USERNAME, "call_mul", None, None, audit.REJECTION),
    ]
