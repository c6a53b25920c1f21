"""Stop while several steps run (parallel research's branches): every one of them is stored,
served and exported as stopped by the person who pressed Stop, none as a failure (issue 25, 3, 8).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from runs.demo.research import RESEARCH_PROMPT, research_rules
from runs.engine.events import parse_event
from runs.engine.testing import Script
from runs.models import Step
from runs.protocol import (
    HumanAction,
    MessageImages,
    ModeChanged,
    StepWaiting,
    TaskAbandoned,
)
from runs.telemetry.spans import TraceBuilder, resource_for
from tests.audit_support import stored_events
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
)
from tests.rest_support import Api, user_with_token

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

_SERVER_EVENTS = {
    "human_action": HumanAction,
    "task_abandoned": TaskAbandoned,
    "step_waiting": StepWaiting,
    "mode_changed": ModeChanged,
    "message_images": MessageImages,
}


def typed(payload: dict[str, Any]) -> Any:
    """A stored event as the publisher handed it to telemetry."""
    server_event = _SERVER_EVENTS.get(payload["type"])
    if server_event is not None:
        return server_event.model_validate(payload)
    return parse_event(payload)


def spans_of(payloads: list[dict[str, Any]]) -> list[ReadableSpan]:
    """The spans the telemetry exporter derives from these stored events, in order."""
    builder = TraceBuilder(resource_for("agentui", "p"), "notebook-1", agent="research")
    spans: list[ReadableSpan] = []
    for payload in payloads:
        spans.extend(builder.observe(typed(payload)))
    return spans


async def test_stop_with_three_branches_running_stops_all_three_by_that_person(
    scripted_server: Any,
) -> None:
    model = scripted_server(Script(rules=research_rules()))  # each branch takes >= 1 s
    with llm_at(model):
        _, token = await user_with_token("ana")
        api = Api(token)
        created = await api.post(
            "/notebooks/",
            {"text": RESEARCH_PROMPT, "agent": "parallel_research", "mode": "auto"},
        )
        assert created.status_code == 201, created.content
        pk = created.json()["id"]
        # the split, then the three branches' model calls: all three steps are running
        await asyncio.to_thread(model.wait_for_requests, 4)
        stopped = await api.post(f"/notebooks/{pk}/stop")
        assert stopped.status_code == 202, stopped.content
        detail = await api.wait(pk)
        steps = (await api.get(f"/notebooks/{pk}/steps/")).json()["items"]

    # REST: the outcome names who stopped and every step that was running
    assert (detail["outcome"], detail["by"], detail["stopped_steps"]) == (
        "stopped",
        "ana",
        [2, 3, 4],
    )
    assert [s["status"] for s in steps] == [
        "completed",
        "interrupted",
        "interrupted",
        "interrupted",
        "pending",  # the synthesis, which never ran
    ]
    assert len(model.requests) == 4  # nothing ran again, nothing ran after

    # the stored trail: one stop per running branch, each branch interrupted by the stop
    events = await database_sync_to_async(stored_events)(pk)
    branches = [s["step_id"] for s in steps[1:4]]
    assert not [e for e in events if e["type"] == "step_failed"]
    interrupted = [e for e in events if e["type"] == "step_interrupted"]
    assert sorted(e["step_id"] for e in interrupted) == sorted(branches)
    assert {e["reason"] for e in interrupted} == {"cancelled"}
    stops = [e for e in events if e["type"] == "human_action"]
    assert sorted((e["action"], e["by"], e["step_id"]) for e in stops) == sorted(
        ("stopped", "ana", b) for b in branches
    )
    assert all(e["while_running"] for e in stops)
    rows = await database_sync_to_async(
        lambda: {
            s.step_id: (s.status, s.ended_at is not None, s.error)
            for s in Step.objects.filter(task_id=pk)
        }
    )()
    assert {rows[b] for b in branches} == {("interrupted", True, "")}

    # telemetry: one AGENT span, stopped by ana; the branches stopped, not failed
    spans = spans_of(events)
    agents = [s for s in spans if s.attributes["openinference.span.kind"] == "AGENT"]
    assert len(agents) == 1
    assert agents[0].attributes["agentui.outcome"] == "stopped"
    assert agents[0].attributes["agentui.stopped_by"] == "ana"
    branch_spans = [
        s
        for s in spans
        if s.attributes["openinference.span.kind"] == "CHAIN"
        and s.attributes.get("graph.node.id") in branches
    ]
    assert len(branch_spans) == 3
    assert {s.attributes.get("agentui.outcome") for s in branch_spans} == {"stopped"}
    assert not [s for s in spans if s.status.status_code is StatusCode.ERROR]
