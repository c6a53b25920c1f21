"""A 10 MB tool output (issue 16, item 2): stored once, cut on the wire, sliced for the model.

The output is the `server_log` tool's (about 10.4 MB of text). It must be stored about once (not
as `content`, `raw_output` and the next call's `agent_input`: 30 MB), every websocket frame must
stay under daphne's 1 MiB (live and on a reconnect's replay), the cut value must download whole
for its owner only, and the model must get the configured slice with a note that it was cut.
Runs on SQLite + the in-memory layer and, in the services pass, on PostgreSQL + Redis.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient, override_settings

from runs.engine.testing import Match, Reply, Rule, Script, ToolCallSpec
from runs.models import Event, Message, Step
from runs.presets.tools.logs import server_log
from runs.protocol.wire import WIRE_EVENT_BYTES
from runs.service.tokens import create_token
from tests.live_support import (
    Client,
    body,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.rest_support import API, Api

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]

LINES = 120_000
MODEL_CHARS = 40_000
MIB = 1024 * 1024


def log_script(lines: int = LINES) -> Script:
    """The model reads `lines` lines of the server log, then answers."""
    return Script(
        rules=[
            Rule(
                name="fetch",
                match=Match(last_user_contains="server log", tool_results_since_user=0),
                reply=Reply(
                    text="Let me read the log.",
                    tool_calls=[
                        ToolCallSpec(
                            name="server_log", arguments={"lines": lines}, id="c_log"
                        )
                    ],
                ),
            ),
            Rule(
                name="answer",
                match=Match(tool_results_since_user=1),
                reply=Reply(text="The log shows mostly 200s."),
            ),
        ]
    )


def stored_bytes(task_pk: int) -> int:
    """Bytes of everything the notebook stored that can hold a tool output."""
    total = sum(
        len(json.dumps(p))
        for p in Event.objects.filter(task_id=task_pk).values_list("payload", flat=True)
    )
    total += sum(
        len(c or "")
        for c in Message.objects.filter(task_id=task_pk).values_list(
            "content", flat=True
        )
    )
    for row in Step.objects.filter(task_id=task_pk).values(
        "output",
        "sources",
        "step_state",
        "tool_calls",
        "checkpoint",
        "stream_text",
        "original_input",
        "input",
    ):
        total += sum(len(json.dumps(v)) for v in row.values())
    return total


async def download(user: Any, url: str) -> tuple[int, bytes]:
    http = AsyncClient()
    await http.aforce_login(user)
    response = await http.get(url)
    return response.status_code, await body(response)


@override_settings(AGENTUI_TOOL_OUTPUT_MODEL_CHARS=MODEL_CHARS)
async def test_a_10_mb_tool_output_leaves_the_notebook_usable(
    scripted_server: Any,
) -> None:
    server = scripted_server(log_script())
    full = server_log(LINES)
    assert len(full) > 10_000_000
    user = await database_sync_to_async(make_user)("alice")
    notebook = await database_sync_to_async(make_notebook)(user)
    with llm_at(server):
        client = await Client.open(user, notebook.pk)
        await client.send("resume", last_seq=0)
        await client.until(lambda m: m["type"] == "replay_done")
        await client.send("send_message", text="Read the server log for me")
        await client.until_event("task_completed", timeout=120)
        live_result = client.events("tool_call_result")[0]
        await client.close()

        # every frame the socket sent is bounded, the big one included
        assert max(client.frame_sizes) < MIB
        assert max(client.frame_sizes) <= WIRE_EVENT_BYTES + 1024
        content = live_result["tool_output"]["content"]
        assert full.startswith(content) and len(content) < len(full)
        [cut] = [
            c
            for c in live_result["truncated"]
            if c["path"] == ["tool_output", "content"]
        ]
        assert cut["chars"] == len(full)
        assert cut["more_bytes"] == len(full) - len(content)
        # and it says the model was given only its first MODEL_CHARS characters
        assert live_result["model_chars"] == MODEL_CHARS

        # stored about once: ~10.4 MB, not three copies
        stored = await database_sync_to_async(stored_bytes)(notebook.pk)
        assert len(full) <= stored < len(full) * 1.2, stored

        # the model got the configured slice, with a note that it was cut
        tool_messages = [
            m for m in server.requests[-1].messages if m.get("role") == "tool"
        ]
        assert len(tool_messages) == 1
        sent = tool_messages[0]["content"]
        assert sent.startswith(full[:MODEL_CHARS])
        assert len(sent) < MODEL_CHARS + 300
        assert "tool output cut" in sent and f"{len(full):,}" in sent

        # a reconnect replays everything, bounded as well
        again = await Client.open(user, notebook.pk)
        await again.send("resume", last_seq=0)
        done = await again.until(lambda m: m["type"] == "replay_done", timeout=60)
        await again.close()
        assert again.seqs() == list(range(1, done["last_seq"] + 1))
        assert max(again.frame_sizes) < MIB
        assert again.events("tool_call_result")[0] == live_result

    # the whole output downloads from the link, for its owner only
    status, body = await download(user, cut["url"])
    assert status == 200 and body.decode() == full
    stranger = await database_sync_to_async(make_user)("mallory")
    status, _ = await download(stranger, cut["url"])
    assert status == 404

    # the REST API lists the event cut as well, naming its own URL of the value whole
    _, token = await database_sync_to_async(create_token)(user, "big output")
    api = Api(token)
    listed = await api.get(f"/notebooks/{notebook.pk}/events/", type="tool_call_result")
    [event] = listed.json()["items"]
    assert event["event"]["tool_output"]["content"] == content
    assert event["event"]["model_chars"] == MODEL_CHARS
    [rest_cut] = [
        c
        for c in event["event"]["truncated"]
        if c["path"] == ["tool_output", "content"]
    ]
    assert rest_cut["url"].startswith(f"/api/v1/notebooks/{notebook.pk}/events/")
    whole = await api.client.get(rest_cut["url"], headers=api.headers)
    assert whole.status_code == 200 and whole.content.decode() == full
    _, other = await database_sync_to_async(create_token)(stranger, "nosy")
    assert (
        await Api(other).client.get(rest_cut["url"], headers=Api(other).headers)
    ).status_code == 404
    value_url = f"{API}/notebooks/{notebook.pk}/events/{event['seq']}/value"
    bad = await api.client.get(value_url, {"path": "{"}, headers=api.headers)
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_input"
    # the page's address takes a path nested too deep to read: refused, not a server error
    status, _ = await download(
        user, f"/tasks/{notebook.pk}/events/{event['seq']}/value?path={'[' * 5_000}"
    )
    assert status == 400
    nowhere = await api.client.get(value_url, {"path": '["nope"]'}, headers=api.headers)
    assert nowhere.status_code == 404 and nowhere.json()["code"] == "not_found"

    # the export holds the full value; the trace page's cut export does not
    status, body = await download(user, f"/api/tasks/{notebook.pk}/trace.json")
    exported = json.loads(body)
    [result] = [
        e["event"]
        for e in exported["events"]
        if e["event"]["type"] == "tool_call_result"
    ]
    assert status == 200 and result["tool_output"]["content"] == full
    status, body = await download(user, f"/api/tasks/{notebook.pk}/trace.json?cut=1")
    assert status == 200 and len(body) < 2 * MIB


async def test_the_trace_pages_export_cuts_events_as_sockets_do_and_sends_the_rest_as_stored() -> (
    None
):
    """Small events go out as the database holds them; a large one, even one that is short in
    characters but long once escaped (50,000 'é' are 300 KB as JSON escapes; PostgreSQL's
    stored text has them unescaped, 50,000 characters), is cut."""
    from runs.protocol.wire import bounded

    user = await database_sync_to_async(make_user)("alice")
    notebook = await database_sync_to_async(make_notebook)(user)
    payloads = [
        {"type": "tool_call_result", "step_id": "s1", "tool_id": f"c{n}", "at": 1.5}
        | {"tool_output": {"content": text, "raw_output": None, "is_error": False}}
        for n, text in enumerate(["small é", "é" * 50_000, "x" * 300_000])
    ]
    await Event.objects.abulk_create(
        Event(task=notebook, seq=n, type=p["type"], payload=p, at=p["at"])
        for n, p in enumerate(payloads, start=1)
    )
    status, body_bytes = await download(
        user, f"/api/tasks/{notebook.pk}/trace.json?cut=1&results=0"
    )
    sent = [item["event"] for item in json.loads(body_bytes)["events"]]
    expected = [bounded(p, notebook.pk, n) for n, p in enumerate(payloads, start=1)]
    assert status == 200 and sent == json.loads(json.dumps(expected))
    assert sent[0] == payloads[0]
    assert "truncated" in sent[1] and "truncated" in sent[2]
