"""The REST API (/api/v1/): the same actions as the websocket with the same results, ownership
(404), tokens (401), bad input (422, naming the field), paging and filters, exactly-once.

Runs on SQLite with the in-memory layer, and on PostgreSQL with Redis in make test's second pass.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from runs import service
from runs.models import ApiToken, Task
from runs.rest.reading import MAX_PAGE_SIZE
from runs.service.tokens import revoke_token
from tests.live_support import (
    ANSWER,
    QUESTION,
    Client,
    body,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    db_snapshot,
    make_notebook,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)
from tests.rest_support import API, Api, stored_state, user_with_token

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]

EDIT = [{"tool_id": "call_add", "tool_kwargs": {"a": 2, "b": 30}}]


async def by_websocket(user: Any) -> int:
    """Tools mode through the page's socket: edit one call, reject the other, approve, then
    undo the answer and approve it again."""
    notebook = await database_sync_to_async(make_notebook)(user, mode="tools")
    ws = await Client.open(user, notebook.pk)
    await ws.send("resume", last_seq=0)
    await ws.until(lambda m: m["type"] == "replay_done")

    async def acked(action: str, **fields: Any) -> None:
        reply = await ws.reply_to(await ws.send(action, **fields))
        assert reply["type"] == "ack", reply

    await acked("send_message", text=QUESTION)
    step_id = (await ws.until_event("step_waiting"))["event"]["step_id"]
    await acked("edit_input", step_id=step_id, input=json.dumps(EDIT))
    await acked("reject_tool_call", step_id=step_id, tool_id="call_mul", reason="no")
    await acked("approve", step_id=step_id)
    await ws.until_event("task_completed")
    await service.wait_idle()
    last = ws.events("step_completed")[-1]["step_id"]
    await acked("undo", step_id=last)
    await ws.until_event("step_waiting", step_id=last)
    await acked("approve", step_id=last)
    await ws.until(
        lambda m: (
            m["type"] == "event"
            and m["event"]["type"] == "task_completed"
            and m["seq"] > ws.events("step_undone")[0]["at"] * 0
            and len(ws.events("task_completed")) == 2
        )
    )
    await service.wait_idle()
    await ws.close()
    return notebook.pk


async def by_rest(api: Api) -> int:
    """The same decisions over the REST API."""
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "tools"}
    )
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    detail = await api.wait(pk)
    assert detail["status"] == "waiting"
    [step] = detail["waiting"]
    assert step["kind"] == "tool_calls"
    step_id = step["step_id"]
    base = f"/notebooks/{pk}/steps/{step_id}"
    edited = await api.post(f"{base}/edit", {"input": json.dumps(EDIT)})
    assert edited.status_code == 202, edited.content
    rejected = await api.post(f"{base}/tool-calls/call_mul/reject", {"reason": "no"})
    assert rejected.status_code == 202, rejected.content
    assert (await api.post(f"{base}/approve")).status_code == 202
    detail = await api.wait(pk)
    assert detail["status"] == "idle" and detail["outcome"] == "answered"
    completed = (await api.get(f"/notebooks/{pk}/steps/", status="completed")).json()
    last = completed["items"][-1]["step_id"]
    undone = await api.post(f"/notebooks/{pk}/undo", {"step_id": last})
    assert undone.status_code == 202, undone.content
    detail = await api.wait(pk)
    assert [s["step_id"] for s in detail["waiting"]] == [last]
    assert (await api.post(f"/notebooks/{pk}/steps/{last}/approve")).status_code == 202
    await api.wait(pk)
    await service.wait_idle()
    return int(pk)


async def test_rest_and_websocket_store_the_same_state(server: Any) -> None:
    user, token = await user_with_token("alice")
    page_pk = await by_websocket(user)
    rest_pk = await by_rest(Api(token))
    page = await database_sync_to_async(stored_state)(page_pk)
    rest = await database_sync_to_async(stored_state)(rest_pk)
    assert rest == page
    # and the state is the one asked for: edited, rejected, approved by alice, undone, redone
    assert rest["turns"] == [(1, QUESTION, "completed", ANSWER)]
    assert [h[0] for h in rest["human_actions"]] == [
        "edited_arguments",
        "rejected_call",
        "approved",
        "undone",  # an undo is the person's action too (issue 25)
        "approved",
    ]
    assert {h[1] for h in rest["human_actions"]} == {"alice"}
    assert rest["event_types"]["step_undone"] == 1
    assert rest["seqs_contiguous"] and rest["lease"] == ""
    assert [s[2] for s in rest["steps"]] == ["completed", "completed", "completed"]


async def test_someone_elses_notebook_is_not_found_and_stays_untouched(
    server: Any,
) -> None:
    alice, _ = await user_with_token("alice")
    _, bob_token = await user_with_token("bob")
    notebook = await database_sync_to_async(make_notebook)(alice, mode="step")
    await service.send_message(notebook.pk, QUESTION)
    await service.wait_idle()
    before = await database_sync_to_async(db_snapshot)(notebook.pk)
    step_id = before["step"][0]["step_id"]
    bob = Api(bob_token)
    pk = notebook.pk
    for path in (
        f"/notebooks/{pk}",
        f"/notebooks/{pk}/wait",
        f"/notebooks/{pk}/turns/",
        f"/notebooks/{pk}/steps/",
        f"/notebooks/{pk}/steps/{step_id}",
        f"/notebooks/{pk}/events/",
        f"/notebooks/{pk}/trace",
        "/notebooks/999999",
    ):
        response = await bob.get(path)
        assert response.status_code == 404, (path, response.content)
        assert response.json()["code"] == "not_found"
    for path, payload in (
        (f"/notebooks/{pk}/messages", {"text": "hi"}),
        (f"/notebooks/{pk}/steps/{step_id}/approve", {}),
        (f"/notebooks/{pk}/steps/{step_id}/edit", {"input": "x"}),
        (f"/notebooks/{pk}/steps/{step_id}/tool-calls/call_add/reject", {}),
        (f"/notebooks/{pk}/undo", {}),
        (f"/notebooks/{pk}/stop", {}),
        (f"/notebooks/{pk}/mode", {"mode": "auto"}),
    ):
        response = await bob.post(path, payload)
        assert response.status_code == 404, (path, response.content)
    listed = (await bob.get("/notebooks/")).json()
    assert listed["count"] == 0 and listed["items"] == []
    await service.wait_idle()
    assert await database_sync_to_async(db_snapshot)(notebook.pk) == before
    assert server.requests == []


async def test_tokens_and_sessions(server: Any) -> None:
    alice, token = await user_with_token("alice")
    notebook = await database_sync_to_async(make_notebook)(alice)
    path = f"{API}/notebooks/{notebook.pk}"

    async def status_and_code(headers: dict[str, str] | None = None) -> Any:
        response = await AsyncClient().get(path, headers=headers or {})
        return response.status_code, response.json().get("code")

    assert await status_and_code({"Authorization": f"Bearer {token}"}) == (200, None)
    for headers in (
        None,
        {"Authorization": "Bearer agentui_wrong"},
        {"Authorization": f"Basic {token}"},
    ):
        assert await status_and_code(headers) == (401, "unauthenticated"), headers
    response = await AsyncClient().get(path, headers={"Authorization": "Bearer bad"})
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["detail"] == "Unknown API token."

    row = await ApiToken.objects.aget(user=alice)
    await database_sync_to_async(revoke_token)(alice, row.pk)
    response = await AsyncClient().get(
        path, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 401
    assert response.json()["detail"] == "This API token has been revoked."

    # the browser's session works too; its POSTs need the CSRF token, as the page's do
    session = AsyncClient(enforce_csrf_checks=True)
    await session.aforce_login(alice)
    assert (await session.get(path)).status_code == 200
    refused = await session.post(
        f"{path}/mode", json.dumps({"mode": "step"}), content_type="application/json"
    )
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    # and an anonymous script is told, not sent to the login page
    anonymous = await AsyncClient().post(
        f"{API}/notebooks/", "{}", content_type="application/json"
    )
    assert anonymous.status_code == 401


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"agent": "function_calling"}, "text: Field required"),
        (
            {"text": "", "agent": "function_calling"},
            "text: String should have at least 1 character",
        ),
        ({"text": "a\x00b", "agent": "function_calling"}, "text: contains a NUL"),
        ({"text": "hi", "agent": "function_calling", "mode": "fast"}, "mode: Input"),
        ({"text": "hi", "agent": "nobody"}, "there is no agent preset 'nobody'"),
        (
            {"text": 5, "agent": "function_calling"},
            "text: expected a string",
        ),
        (
            {"text": "x" * 20_001, "agent": "function_calling"},
            "text: String should have at most 20000 characters",
        ),
    ],
)
async def test_bad_input_is_refused_naming_the_field(
    server: Any, payload: dict[str, Any], field: str
) -> None:
    _, token = await user_with_token("alice")
    response = await Api(token).post("/notebooks/", payload)
    assert response.status_code == 422, response.content
    assert response.json()["code"] == "invalid_input"
    assert field in response.json()["detail"]
    assert await Task.objects.acount() == 0
    assert server.requests == []


async def test_bad_actions_are_refused_and_change_nothing(server: Any) -> None:
    alice, token = await user_with_token("alice")
    api = Api(token)
    notebook = await database_sync_to_async(make_notebook)(alice, mode="tools")
    await service.send_message(notebook.pk, QUESTION)
    await service.wait_idle()
    before = await database_sync_to_async(db_snapshot)(notebook.pk)
    step_id = (await api.get(f"/notebooks/{notebook.pk}")).json()["waiting"][0][
        "step_id"
    ]
    base = f"/notebooks/{notebook.pk}/steps/{step_id}"
    cases = [
        (f"{base}/edit", {}, 422, "input: Field required"),
        (f"{base}/edit", {"input": "[" * 40 + "]" * 40}, 422, "input: nests lists"),
        (
            f"{base}/edit",
            {"input": '[{"tool_id": "call_add", "tool_kwargs": {"a": "two"}}]'},
            422,
            "arguments for add() do not fit its schema: a: ",
        ),
        (
            f"/notebooks/{notebook.pk}/steps/{'x' * 65}/approve",
            {},
            422,
            "step_id: String should have at most 64 characters",
        ),
        (f"/notebooks/{notebook.pk}/steps/nope/approve", {}, 404, "no step 'nope'"),
        (f"{base}/tool-calls/call_nope/reject", {"reason": "x"}, 404, "call_nope"),
        (
            f"{base}/tool-calls/call_mul/reject",
            {"reason": "a\x00"},
            422,
            "reason: contains a NUL",
        ),
        (
            f"/notebooks/{notebook.pk}/messages",
            {"text": "hi"},
            409,
            "a turn is still going on",
        ),
        (f"/notebooks/{notebook.pk}/undo", {"step_id": step_id}, 409, step_id),
        (
            f"/notebooks/{notebook.pk}/mode",
            {"mode": "sometimes"},
            422,
            "mode: Input should be",
        ),
    ]
    for path, payload, status, detail in cases:
        response = await api.post(path, payload)
        assert response.status_code == status, (path, response.content)
        assert detail in response.json()["detail"], (path, response.json())
    broken = await api.client.post(
        f"{API}{base}/edit",
        "{not json",
        content_type="application/json",
        headers=api.headers,
    )
    assert broken.status_code in (400, 422) and broken.json()["code"]
    await service.wait_idle()
    assert await database_sync_to_async(db_snapshot)(notebook.pk) == before
    assert len(server.requests) == 1  # only the first model turn, before the tool calls


async def test_concurrent_duplicate_approvals_run_the_step_once(server: Any) -> None:
    _, token = await user_with_token("alice")
    api = Api(token)
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "step"}
    )
    pk = created.json()["id"]
    step_id = (await api.wait(pk))["waiting"][0]["step_id"]
    responses = await asyncio.gather(
        *(api.post(f"/notebooks/{pk}/steps/{step_id}/approve") for _ in range(12))
    )
    codes = sorted(r.status_code for r in responses)
    assert codes == [202] + [409] * 11, [r.content for r in responses]
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {
        "already_running"
    }
    await api.wait(pk)
    await service.wait_idle()
    assert len(server.requests) == 1
    started = (await api.get(f"/notebooks/{pk}/events/", type="step_started")).json()
    assert [e["step_id"] for e in started["items"]] == [step_id]
    approvals = (await api.get(f"/notebooks/{pk}/events/", type="human_action")).json()
    assert approvals["count"] == 1
    again = await api.post(f"/notebooks/{pk}/steps/{step_id}/approve")
    assert again.status_code == 409 and "already run" in again.json()["detail"]


def seed_notebooks(user: Any) -> list[int]:
    """Seven notebooks: 5 function-calling (3 mentioning zebras), 2 react; statuses vary."""
    pks = []
    for i in range(7):
        agent = "function_calling" if i < 5 else "react"
        task = Task.objects.create(
            owner=user,
            agent=agent,
            mode="step" if i % 2 else "auto",
            title=f"zebra count {i}" if i < 3 else f"sales {i}",
            status="waiting" if i in (1, 5) else "idle",
        )
        pks.append(task.pk)
    return pks


async def test_lists_page_and_filter_as_the_traces_page_does(server: Any) -> None:
    alice, token = await user_with_token("alice")
    bob, _ = await user_with_token("bob")
    pks = await database_sync_to_async(seed_notebooks)(alice)
    await database_sync_to_async(seed_notebooks)(bob)
    api = Api(token)

    first = (await api.get("/notebooks/", page_size=3)).json()
    assert (first["count"], first["pages"], first["page"], first["page_size"]) == (
        7,
        3,
        1,
        3,
    )
    pages = [first] + [
        (await api.get("/notebooks/", page_size=3, page=n)).json() for n in (2, 3)
    ]
    seen = [item["id"] for page in pages for item in page["items"]]
    assert seen == sorted(pks, reverse=True)  # newest first, each once
    assert (await api.get("/notebooks/", page=9)).json()["items"] == []

    async def ids(**filters: Any) -> list[int]:
        response = await api.get("/notebooks/", **filters)
        assert response.status_code == 200, response.content
        return sorted(item["id"] for item in response.json()["items"])

    assert await ids(q="zebra") == pks[:3]
    assert await ids(agent="react") == pks[5:]
    assert await ids(status="waiting") == [pks[1], pks[5]]
    assert await ids(mode="step") == [pks[1], pks[3], pks[5]]
    assert await ids(q="zebra", status="waiting") == [pks[1]]
    assert await ids(created_after="2000-01-01") == pks
    assert await ids(created_before="2000-01-01") == []
    for bad, field in (
        ({"created_after": "yesterday"}, "created_after: expected a date"),
        ({"status": "sleeping"}, "status: Input should be"),
        ({"page_size": MAX_PAGE_SIZE + 1}, "page_size: Input should be less than"),
        ({"page": 0}, "page: Input should be greater than"),
    ):
        response = await api.get("/notebooks/", **bad)
        assert response.status_code == 422, response.content
        assert field in response.json()["detail"]


async def test_steps_and_events_of_a_run_page_and_filter(server: Any) -> None:
    _, token = await user_with_token("alice")
    api = Api(token)
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "auto"}
    )
    pk = created.json()["id"]
    detail = await api.wait(pk)
    assert (detail["status"], detail["outcome"], detail["response"]) == (
        "idle",
        "answered",
        ANSWER,
    )
    turns = (await api.get(f"/notebooks/{pk}/turns/")).json()
    assert [(t["index"], t["status"]) for t in turns["items"]] == [(1, "completed")]
    steps = (await api.get(f"/notebooks/{pk}/steps/")).json()
    assert [s["kind"] for s in steps["items"]] == ["llm", "llm"]
    assert steps["items"][0]["next_steps"] == [steps["items"][1]["step_id"]]
    assert (await api.get(f"/notebooks/{pk}/steps/", turn="nope")).json()["count"] == 0
    one = (
        await api.get(f"/notebooks/{pk}/steps/{steps['items'][1]['step_id']}")
    ).json()
    assert one["output"] == ANSWER and one["is_last"]

    everything = (await api.get(f"/notebooks/{pk}/events/", page_size=100)).json()
    assert [e["seq"] for e in everything["items"]] == list(
        range(1, everything["count"] + 1)
    )
    after = (await api.get(f"/notebooks/{pk}/events/", after=5, page_size=4)).json()
    assert [e["seq"] for e in after["items"]] == [6, 7, 8, 9]
    results = (
        await api.get(f"/notebooks/{pk}/events/", type="tool_call_result")
    ).json()
    assert sorted(e["event"]["tool_output"]["content"] for e in results["items"]) == [
        "20",
        "5",
    ]

    trace = json.loads(await body(await api.get(f"/notebooks/{pk}/trace")))
    assert trace["task"]["id"] == pk and len(trace["events"]) == everything["count"]


async def test_openapi_schema_and_offline_docs_page() -> None:
    client = AsyncClient()
    schema = await client.get(f"{API}/openapi.json")
    assert schema.status_code == 200
    spec = schema.json()
    assert spec["info"]["title"] == "agentui REST API"
    assert f"{API}/notebooks/{{pk}}/steps/{{step_id}}/approve" in spec["paths"]
    assert spec["components"]["securitySchemes"]["TokenOrSession"]["scheme"] == "bearer"
    docs = await client.get(f"{API}/docs")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    assert "https://" not in html and "cdn" not in html.lower()  # works offline
    bundle = await client.get("/static/ninja/swagger-ui-bundle.js")
    assert bundle.status_code == 200


async def test_messages_mode_and_stop(server: Any) -> None:
    _, token = await user_with_token("alice")
    api = Api(token)
    created = await api.post(
        "/notebooks/", {"text": QUESTION, "agent": "function_calling", "mode": "auto"}
    )
    pk = created.json()["id"]
    await api.wait(pk)

    sent = await api.post(f"/notebooks/{pk}/messages", {"text": "hello again"})
    assert sent.status_code == 202, sent.content
    detail = await api.wait(pk)
    turns = (await api.get(f"/notebooks/{pk}/turns/")).json()["items"]
    assert sent.json()["turn"] == turns[1]["id"]
    assert detail["response"] == "Hello there, I am a scripted model."

    assert (
        await api.post(f"/notebooks/{pk}/mode", {"mode": "step"})
    ).status_code == 202
    assert (
        await api.post(f"/notebooks/{pk}/messages", {"text": "third"})
    ).status_code == 202
    detail = await api.wait(pk)
    assert (detail["status"], detail["mode"]) == ("waiting", "step")
    stopped = await api.post(f"/notebooks/{pk}/stop")
    assert stopped.status_code == 202, stopped.content
    detail = await api.wait(pk)
    assert (detail["status"], detail["outcome"], detail["waiting"]) == (
        "idle",
        "stopped",
        [],
    )
    turns = (await api.get(f"/notebooks/{pk}/turns/")).json()["items"]
    assert [(t["status"], t["abandoned"]) for t in turns] == [
        ("completed", False),
        ("completed", False),
        ("abandoned", True),
    ]
    stops = (await api.get(f"/notebooks/{pk}/events/", type="human_action")).json()
    assert [(e["event"]["action"], e["event"]["by"]) for e in stops["items"]] == [
        ("stopped", "alice")
    ]
    again = await api.post(f"/notebooks/{pk}/stop")
    assert again.status_code == 409, again.content
