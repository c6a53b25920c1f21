"""Nobody reads, watches or acts on someone else's notebook, over HTTP or the websocket."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from runs import service
from runs.models import Task
from runs.web import open_sockets
from tests.live_support import (
    ANSWER,
    ORIGIN,
    QUESTION,
    Client,
    body,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    connect,
    db_snapshot,
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
    session_cookie,
)

pytestmark = [
    pytest.mark.ws,
    pytest.mark.db,
    pytest.mark.django_db(transaction=True),
]


async def logged_in(name: str) -> tuple[Any, AsyncClient]:
    user = await database_sync_to_async(make_user)(name)
    client = AsyncClient()
    await client.aforce_login(user)
    return user, client


async def test_new_task_starts_a_notebook_and_redirects(server: Any) -> None:
    alice, client = await logged_in("alice")
    response = await client.post(
        "/tasks/new", {"text": QUESTION, "agent": "function_calling", "mode": "auto"}
    )
    await service.wait_idle()
    assert response.status_code == 302
    pk = int(response["Location"].rstrip("/").split("/")[-1])
    assert response["Location"].endswith(f"/tasks/{pk}/")
    trace = json.loads(await body(await client.get(f"/api/tasks/{pk}/trace.json")))
    assert (
        trace["task"]["title"] == QUESTION
        and trace["task"]["agent"] == "function_calling"
    )
    assert trace["turns"][0]["response"] == ANSWER
    assert [s["status"] for s in trace["turns"][0]["steps"]] == [
        "completed",
        "completed",
    ]
    assert [e["seq"] for e in trace["events"]] == list(
        range(1, trace["task"]["last_seq"] + 1)
    )
    assert trace["usage"]["total_tokens"] > 0

    for bad in (
        {"text": ""},
        {"text": "keep me", "agent": "nope"},
        {"text": "keep me", "mode": "sometimes"},
    ):
        refused = await client.post("/tasks/new", bad)
        page = refused.content.decode()
        assert refused.status_code == 400
        assert 'role="alert"' in page  # the reason, next to the form
        assert bad["text"] in page  # what the person typed is still there
    assert (await client.get("/tasks/new")).status_code == 405


async def test_http_is_owner_only(server: Any) -> None:
    alice, alice_client = await logged_in("alice")
    _, bob_client = await logged_in("bob")
    notebook = await service.create_notebook(
        alice, QUESTION, "function_calling", "auto"
    )
    await service.wait_idle()

    assert (
        await alice_client.get(f"/api/tasks/{notebook.pk}/trace.json")
    ).status_code == 200
    assert (
        await bob_client.get(f"/api/tasks/{notebook.pk}/trace.json")
    ).status_code == 404
    assert (await bob_client.get("/api/tasks/999999/trace.json")).status_code == 404
    assert json.loads((await bob_client.get("/api/tasks/")).content)["results"] == []
    anonymous = await AsyncClient().get(f"/api/tasks/{notebook.pk}/trace.json")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert (await AsyncClient().post("/tasks/new", {"text": "hi"})).status_code == 302


async def test_listing_searches_filters_and_pages(server: Any) -> None:
    alice, client = await logged_in("alice")
    first = await service.create_notebook(alice, QUESTION, "function_calling", "auto")
    await service.wait_idle()
    second = await service.create_notebook(
        alice, "Say hello", "function_calling", "step"
    )
    await service.wait_idle()

    async def listing(**params: Any) -> dict[str, Any]:
        response = await client.get("/api/tasks/", params)
        assert response.status_code == 200, response.content
        return json.loads(response.content)

    everything = await listing()
    assert [r["id"] for r in everything["results"]] == [second.pk, first.pk]
    assert [r["id"] for r in (await listing(q="4 * 5 = 20"))["results"]] == [
        first.pk
    ]  # found in a message
    assert [r["id"] for r in (await listing(status="waiting"))["results"]] == [
        second.pk
    ]
    assert [r["id"] for r in (await listing(agent="llm_compiler"))["results"]] == []
    assert (await listing(created_after="2000-01-01", created_before="2999-01-01"))[
        "count"
    ] == 2
    assert (await listing(created_before="2000-01-01"))["count"] == 0
    paged = await listing(page_size=1, page=2)
    assert (paged["page"], paged["pages"], [r["id"] for r in paged["results"]]) == (
        2,
        2,
        [first.pk],
    )
    assert (
        await client.get("/api/tasks/", {"created_after": "yesterday"})
    ).status_code == 400
    presets = json.loads((await client.get("/api/presets/")).content)
    assert "function_calling" in [p["name"] for p in presets["presets"]]


async def close_code(communicator: WebsocketCommunicator) -> int:
    message = await communicator.receive_output(timeout=5)
    assert message["type"] == "websocket.close", message
    return int(message["code"])


async def test_sockets_refuse_strangers(server: Any) -> None:
    alice = await database_sync_to_async(make_user)("alice")
    bob = await database_sync_to_async(make_user)("bob")
    notebook = await database_sync_to_async(make_notebook)(alice)

    assert await close_code(await connect(None, notebook.pk)) == 4401
    assert await close_code(await connect(bob, notebook.pk)) == 4403
    assert await close_code(await connect(alice, 999_999)) == 4404

    from agentui.asgi import application

    for headers in ([], [(b"origin", b"http://evil.example")]):
        communicator = WebsocketCommunicator(
            application, f"/ws/tasks/{notebook.pk}/", headers=headers
        )
        connected, _ = await communicator.connect(timeout=5)
        assert not connected  # the origin check refuses the handshake
        await communicator.disconnect()

    client = await Client.open(alice, notebook.pk)  # the owner gets in
    await client.close()


async def test_one_person_may_hold_only_so_many_sockets(
    server: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each socket holds a file descriptor: one person must not use up the server's."""
    monkeypatch.setattr(open_sockets, "_open", Counter())
    settings.AGENTUI_SOCKETS_PER_USER = 2
    alice = await database_sync_to_async(make_user)("alice")
    bob = await database_sync_to_async(make_user)("bob")
    hers = await database_sync_to_async(make_notebook)(alice)
    his = await database_sync_to_async(make_notebook)(bob)
    first, second = [await Client.open(alice, hers.pk) for _ in range(2)]

    assert await close_code(await connect(alice, hers.pk)) == 4429
    from agentui.asgi import application

    cookie = await database_sync_to_async(session_cookie)(alice)
    inbox = WebsocketCommunicator(
        application, "/ws/inbox/", headers=[ORIGIN, (b"cookie", cookie.encode())]
    )
    assert (await inbox.connect(timeout=5))[0]
    assert await close_code(inbox) == 4429  # the inbox's socket counts too

    others = await Client.open(bob, his.pk)  # another person is not held up
    await others.close()
    await first.close()
    third = await Client.open(alice, hers.pk)  # one closed: room for one more
    await third.close()
    await second.close()


async def test_acting_on_someone_elses_steps_changes_nothing(server: Any) -> None:
    alice = await database_sync_to_async(make_user)("alice")
    bob = await database_sync_to_async(make_user)("bob")
    hers = await service.create_notebook(alice, QUESTION, "function_calling", "step")
    his = await database_sync_to_async(make_notebook)(bob, mode="step")
    before = await database_sync_to_async(db_snapshot)(hers.pk)
    step_id = before["step"][0]["step_id"]

    client = await Client.open(bob, his.pk)
    for action, fields in (
        ("approve", {"step_id": step_id}),
        ("edit_input", {"step_id": step_id, "input": "mine now"}),
        (
            "reject_tool_call",
            {"step_id": step_id, "tool_id": "call_add", "reason": "x"},
        ),
        ("undo", {"step_id": step_id}),
    ):
        reply = await client.reply_to(await client.send(action, **fields))
        assert (reply["type"], reply["code"]) == ("error", "not_found"), reply
    await client.close()
    assert await database_sync_to_async(db_snapshot)(hers.pk) == before
    assert server.requests == []


@pytest.mark.parametrize(
    ("origin", "host", "accepted"),
    [
        ("http://localhost:8000", "localhost:8000", True),
        ("http://localhost", None, True),
        (
            "http://localhost:9999",
            "localhost:8000",
            False,
        ),  # another program, same host
        ("http://localhost:9999", None, False),
        ("http://127.0.0.1:8000", "localhost:8000", False),
        ("https://localhost", "localhost", False),  # https page, http socket port
        ("null", "localhost:8000", False),
    ],
)
async def test_the_origin_check_compares_the_port_too(
    server: Any, origin: str, host: str | None, accepted: bool
) -> None:
    from agentui.asgi import application

    alice = await database_sync_to_async(make_user)("alice")
    notebook = await database_sync_to_async(make_notebook)(alice)
    cookie = await database_sync_to_async(session_cookie)(alice)
    headers = [(b"origin", origin.encode()), (b"cookie", cookie.encode())]
    if host is not None:
        headers.append((b"host", host.encode()))
    communicator = WebsocketCommunicator(
        application, f"/ws/tasks/{notebook.pk}/", headers=headers
    )
    connected, _ = await communicator.connect(timeout=5)
    assert connected is accepted, (origin, host)
    await communicator.disconnect()


async def test_the_trace_export_streams_and_holds_the_whole_trace(server: Any) -> None:
    from runs.traces.export import EXPORT_BATCH, trace_json

    alice, client = await logged_in("alice")
    notebook = await service.create_notebook(
        alice, QUESTION, "function_calling", "auto"
    )
    await service.wait_idle()
    response = await client.get(f"/api/tasks/{notebook.pk}/trace.json")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/json"
    chunks = [chunk async for chunk in response.streaming_content]
    assert (
        len(chunks) >= 3
    )  # the head, the events, the results and usage: not one document
    exported = json.loads(b"".join(chunks))
    assert exported == json.loads(
        json.dumps(
            await database_sync_to_async(trace_json)(
                await Task.objects.aget(pk=notebook.pk)
            )
        )
    )
    assert len(exported["events"]) < EXPORT_BATCH  # (a long trace is sent in batches)
    assert exported["turns"][0]["response"] == ANSWER
