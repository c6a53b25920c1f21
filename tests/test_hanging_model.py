"""A model server that accepts a call and then says nothing (issue 16, item 5).

The call fails after the first-byte or between-chunks timeout with a clear `llm_error`, and
Stop (abandon) cancels a call in flight at once instead of waiting for the model, on each of
the model client's transports (`AGENTUI_LLM_TRANSPORT`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings

from runs import service
from runs.engine.testing import Fault, Reply, Rule, Script, Timing
from runs.models import Step, Task
from tests.live_support import (
    Client,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]

FOREVER = 600.0  # far longer than any test waits


async def open_client(mode: str = "auto") -> tuple[Task, Client]:
    user = await database_sync_to_async(make_user)()
    notebook = await database_sync_to_async(make_notebook)(user, mode=mode)
    client = await Client.open(user, notebook.pk)
    await client.send("resume", last_seq=0)
    await client.until(lambda m: m["type"] == "replay_done")
    return notebook, client


@pytest.mark.parametrize(
    ("rule", "where"),
    [
        (Rule(reply=Reply(text="never"), fault=Fault(hang_s=FOREVER)), "first byte"),
        (
            Rule(reply=Reply(text="one two"), timing=Timing(token_delay_s=FOREVER)),
            "between two chunks",
        ),
    ],
)
async def test_a_silent_model_fails_the_step_after_its_timeout(
    scripted_server: Any, rule: Rule, where: str, llm_transport: str
) -> None:
    server = scripted_server(Script(rules=[rule]))
    timeouts = {
        "AGENTUI_LLM_FIRST_BYTE_TIMEOUT_S": 1.0,
        "AGENTUI_LLM_CHUNK_TIMEOUT_S": 1.0,
        "AGENTUI_LLM_TRANSPORT": llm_transport,
    }
    with override_settings(**timeouts), llm_at(server):
        notebook, client = await open_client()
        request = await client.send("send_message", text="Hello?")
        error = await client.until(
            lambda m: (
                m["type"] == "error"
                and m.get("request_id") == request
                and m["code"] != "not_allowed"
            ),
            timeout=30,
        )
        assert error["code"] == "llm_error", error
        assert where in error["reason"] and "timeout" in error["reason"]
        # through Redis the error reply may overtake the step's event
        failed = client.events("step_failed") or [
            (await client.until_event("step_failed"))["event"]
        ]
        assert where in failed[-1]["error"]
        await service.wait_idle()
    step = await Step.objects.aget(task=notebook)
    assert step.status == "failed"  # and can be approved again
    await client.close()


async def test_stop_cancels_a_model_call_in_flight(
    scripted_server: Any, llm_transport: str
) -> None:
    server = scripted_server(
        Script(rules=[Rule(reply=Reply(text="never"), fault=Fault(hang_s=FOREVER))])
    )
    # the default timeouts: far longer than this test waits
    with override_settings(AGENTUI_LLM_TRANSPORT=llm_transport), llm_at(server):
        notebook, client = await open_client()
        await client.send("send_message", text="Hello?")
        await client.until_event("agent_input")
        stop = await client.reply_to(await client.send("abandon"))
        assert stop["type"] == "ack", stop
        await client.until_event("task_abandoned", timeout=10)
        await service.wait_idle(timeout=10)
    assert len(server.requests) == 1
    for _ in range(100):  # the model server notices the client hanging up
        if server.requests[0].error is not None:
            break
        await asyncio.sleep(0.05)
    assert server.requests[0].error == "client disconnected"
    task = await Task.objects.aget(pk=notebook.pk)
    assert task.status == "idle" and task.lease_owner == ""
    assert await Step.objects.filter(task=notebook, status="running").acount() == 0
    await client.close()
