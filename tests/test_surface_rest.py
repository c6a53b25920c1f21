"""What the person sees is what ran, over the REST API (issue 25): a tools-mode notebook served
by daphne is driven through /api/v1/ only — an edit, a rejection with a reason, approvals, two
undos, an edit after the undo, a fork at a step and an edit there — and what REST reads back
(steps, events, human actions, the trace export) is held against what the scripted model server
received and what the tools ran (tests/audit_support.py, tests/recorded_tools.py).
"""

from __future__ import annotations

from pathlib import Path

from browser_helpers import USERNAME, LiveApp
from otlp_collector import Collector
from recorded_tools import executions, ledger_app, spans  # noqa: F401  (fixtures)

from tests.audit_support import (
    EDITED_ADD,
    EDITED_DOUBLE,
    FORK_DOUBLE,
    LEDGER_ANSWER,
    LEDGER_QUESTION,
    REJECTION,
    approval_problems,
    canonical,
    human_actions,
    ledger_executions,
    results_in,
    step_view_problems,
    telemetry_problems,
    wire_problems,
)
from tests.rest_support import LiveRest


def test_what_rest_reads_back_is_what_reached_the_model_and_the_tools(
    ledger_app: LiveApp, spans: Collector, tmp_path: Path
) -> None:
    api = LiveRest(ledger_app.url, ledger_app.api_token("surface"))
    pk = api.post(
        "/notebooks/",
        {"text": LEDGER_QUESTION, "agent": "function_calling", "mode": "tools"},
        status=201,
    )["id"]
    calls = api.waiting(pk)
    assert [c["tool_id"] for c in calls["tool_calls"]] == ["call_add", "call_mul"]
    api.edit_call(pk, calls["step_id"], "call_add", EDITED_ADD)
    api.post(
        f"/notebooks/{pk}/steps/{calls['step_id']}/tool-calls/call_mul/reject",
        {"reason": REJECTION},
    )
    api.post(f"/notebooks/{pk}/steps/{calls['step_id']}/approve")
    double = api.waiting(pk)
    api.post(f"/notebooks/{pk}/steps/{double['step_id']}/approve")
    assert api.settled(pk)["response"] == LEDGER_ANSWER
    # take back the answer and the doubling; double the corrected sum instead
    api.post(f"/notebooks/{pk}/undo", {})
    api.settled(pk)
    api.post(f"/notebooks/{pk}/undo", {})
    again = api.waiting(pk)
    assert again["step_id"] == double["step_id"]
    api.edit_call(pk, again["step_id"], "call_dbl", EDITED_DOUBLE)
    api.post(f"/notebooks/{pk}/steps/{again['step_id']}/approve")
    assert api.settled(pk)["response"] == LEDGER_ANSWER

    # fork at the step that proposed the doubling, and double something else there
    proposer = next(
        s["step_id"]
        for s in api.every(f"/notebooks/{pk}/steps/")
        if s["kind"] == "llm"
        and s["status"] == "completed"
        and double["step_id"] in s["next_steps"]
    )
    fork = api.post(f"/notebooks/{pk}/fork", {"step_id": proposer}, status=201)
    copied = fork["last_seq"]  # the fork's log starts with the source's, copied
    in_fork = api.waiting(fork["id"])
    api.edit_call(fork["id"], in_fork["step_id"], "call_dbl", FORK_DOUBLE)
    assert api.approve_the_rest(fork["id"])["response"] == LEDGER_ANSWER

    events = {
        nb: [e["event"] for e in api.every(f"/notebooks/{nb}/events/")]
        for nb in (pk, fork["id"])
    }
    own = events[pk] + events[fork["id"]][copied:]
    ran = executions(tmp_path / "tools.jsonl")
    assert sorted(map(canonical, ran)) == sorted(map(canonical, ledger_executions()))
    problems = wire_problems(ledger_app.model.requests, own, ran)
    # the exported telemetry: one TOOL span per run, with the arguments that ran
    exported = spans.wait_for("TOOL", len(results_in(own)))
    problems += telemetry_problems(exported, own)
    assert not problems, "\n".join(problems)
    for nb, log in events.items():
        assert approval_problems(log) == [], nb
        steps = api.every(f"/notebooks/{nb}/steps/")
        assert step_view_problems(steps, log) == [], nb
        trace = api.get(f"/notebooks/{nb}/trace")
        assert [e["event"] for e in trace["events"]] == log
        traced = [s for turn in trace["turns"] for s in turn["steps"]]
        assert step_view_problems(traced, log) == [], nb
        # a call's message, rewritten with the arguments that ran, is still its model step's
        kinds = {s["step_id"]: s["kind"] for s in steps}
        makers = [
            kinds[m["step"]]
            for m in trace["messages"]
            if m["tool_calls"] and m["status"] == "active"
        ]
        assert makers == ["llm", "llm"], nb

    # the human actions, as REST gives them, say who decided what, with the values
    assert human_actions(events[pk]) == [
        ("edited_arguments", USERNAME, "call_add", {"a": 2, "b": 3}, EDITED_ADD, None),
        ("rejected_call", USERNAME, "call_mul", None, None, REJECTION),
        ("approved", USERNAME, None, None, None, None),
        ("approved", USERNAME, None, None, None, None),
        ("undone", USERNAME, None, None, None, None),
        ("undone", USERNAME, None, None, None, None),
        (
            "edited_arguments",
            USERNAME,
            "call_dbl",
            {"a": 5, "b": 2},
            EDITED_DOUBLE,
            None,
        ),
        ("approved", USERNAME, None, None, None, None),
    ]
    # the fork copied the source's log up to its step: the edit made there before it ran, and
    # not the approval that ran it (its step waits in the fork)
    assert human_actions(events[fork["id"]]) == [
        *human_actions(events[pk])[:-1],
        ("edited_arguments", USERNAME, "call_dbl", EDITED_DOUBLE, FORK_DOUBLE, None),
        ("approved", USERNAME, None, None, None, None),
        (
            "approved",
            USERNAME,
            None,
            None,
            None,
            None,
        ),  # the answer step (a fork runs in step mode)
    ]
