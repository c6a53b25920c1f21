"""The audit trail over the socket and in the traces list: who did what, and how turns ended.

Runs on SQLite with the in-memory layer, and on PostgreSQL with Redis in make test's services pass.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client as HttpClient

from runs import service
from runs.engine.testing import ScriptedServer
from tests.audit_support import human_actions
from tests.live_support import (
    QUESTION,
    Client,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]


def listed(user: Any) -> dict[int, dict[str, Any]]:
    http = HttpClient()
    http.force_login(user)
    data = json.loads(http.get("/api/tasks/").content)
    return {row["id"]: row for row in data["results"]}


async def test_edits_rejections_approvals_and_stops_are_stored_with_who_and_the_value_before(
    server: ScriptedServer,
) -> None:
    user = await database_sync_to_async(make_user)("ana")
    tools = await database_sync_to_async(make_notebook)(user, mode="tools")
    client = await Client.open(user, tools.pk)
    await client.send("resume", last_seq=0)
    await client.ok("send_message", text=QUESTION)
    step_id = (await client.until_event("step_waiting"))["event"]["step_id"]
    calls = [
        {"tool_id": "call_add", "tool_kwargs": {"a": 2, "b": 30}},
        {"tool_id": "call_mul", "tool_kwargs": {"a": 4, "b": 5}},
    ]
    await client.ok("edit_input", step_id=step_id, input=json.dumps(calls))
    await client.ok(
        "reject_tool_call",
        step_id=step_id,
        tool_id="call_mul",
        reason="not needed",
    )
    await client.ok("approve", step_id=step_id)
    await client.until_event("task_completed")
    await service.wait_idle()
    actions = human_actions(client.events("human_action"))
    assert actions == [
        (
            "edited_arguments",
            "ana",
            "call_add",
            {"a": 2, "b": 3},
            {"a": 2, "b": 30},
            None,
        ),
        ("rejected_call", "ana", "call_mul", None, None, "not needed"),
        ("approved", "ana", None, None, None, None),
    ]
    await client.close()

    step = await database_sync_to_async(make_notebook)(user, mode="step")
    client = await Client.open(user, step.pk)
    await client.send("resume", last_seq=0)
    await client.ok("send_message", text=QUESTION)
    first = (await client.until_event("step_waiting"))["event"]["step_id"]
    await client.ok("approve", step_id=first)
    second = (await client.until_event("step_waiting", timeout=15))["event"]["step_id"]
    assert second != first
    await client.ok("abandon")
    await client.until_event("task_abandoned")
    await service.wait_idle()
    stop = client.events("human_action")[-1]
    assert (stop["action"], stop["by"], stop["step_id"], stop["while_running"]) == (
        "stopped",
        "ana",
        second,
        False,
    )
    await client.close()

    rows = await database_sync_to_async(listed)(user)
    answered, stopped = rows[tools.pk], rows[step.pk]
    assert answered["outcome"] == "answered" and answered["human_actions"] == 3
    assert (
        answered["steps"] == 3
        and answered["tool_calls"] == 2
        and answered["tokens"] > 0
    )
    assert answered["answer"] and answered["wall_time_s"] > 0
    assert (stopped["outcome"], stopped["by"], stopped["step"]) == ("stopped", "ana", 2)
    assert (
        stopped["steps"] == 1
        and stopped["human_actions"] == 2
        and stopped["answer"] == ""
    )


def test_an_annotation_must_name_something_in_the_notebook_and_say_something() -> None:
    from runs.models import Annotation

    owner, other = make_user("ana"), make_user("bo")
    notebook = make_notebook(owner)
    http = HttpClient()
    http.force_login(owner)
    url = f"/api/tasks/{notebook.pk}/annotations/"

    def post(body: Any) -> Any:
        return http.post(url, data=json.dumps(body), content_type="application/json")

    for body, reason in [
        ({"target": "step", "step_id": "nope", "rating": 1}, "no step"),
        ({"target": "answer", "turn_id": "nope", "comment": "x"}, "no answer"),
        ({"target": "step", "step_id": "x", "rating": 2}, "rating"),
        ({"target": "step", "step_id": "x", "extra": 1}, "extra"),
        ("not an object", "dictionary"),
    ]:
        response = post(body)
        assert (
            response.status_code == 400 and reason in response.json()["error"].lower()
        ), (body, response.json())
    deep = http.post(url, data="[" * 100_000, content_type="application/json")
    assert deep.status_code == 400, (
        "nested too deep to read: refused, not a server error"
    )
    assert deep.json() == {"error": "send a JSON object"}
    assert Annotation.objects.count() == 0, "nothing stored"
    outsider = HttpClient()
    outsider.force_login(other)
    assert outsider.get(url).status_code == 404
