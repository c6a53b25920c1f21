"""Stop pressed in one server process cancels the model call running in another (issue 16, item 5).

The step runs in a child process (`manage.py notebook send`, on the same PostgreSQL test
database and Redis) whose model call hangs; Stop is sent to this process's socket. The child
must cancel its call (the scripted server sees the client hang up) instead of waiting for the
model, and the turn is abandoned with the task as before the step. Needs PostgreSQL and Redis
(make test's services pass). The time from Stop to `task_abandoned` is printed (-s shows it).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs.engine.testing import Fault, Reply, Rule, Script
from runs.models import Message, Step, Task, Turn
from tests.live_support import (
    Client,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.test_ws_redis import child_database_url, manage

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.ws,
    pytest.mark.db,
    pytest.mark.django_db(transaction=True),
]

FOREVER = 600.0  # far longer than the test waits; the default model timeouts are 60 s


async def test_stop_in_this_process_cancels_the_call_running_in_another(
    scripted_server: Any, subprocess_env: Any, redis_url: str
) -> None:
    server = scripted_server(
        Script(rules=[Rule(reply=Reply(text="never"), fault=Fault(hang_s=FOREVER))])
    )
    env = subprocess_env(
        DATABASE_URL=child_database_url(),
        REDIS_URL=redis_url,
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="sk-test",
        AGENTUI_MODEL="scripted",
    )
    user = await database_sync_to_async(make_user)()
    notebook = await database_sync_to_async(make_notebook)(user)
    with llm_at(server):
        client = await Client.open(user, notebook.pk)
        await client.send("resume", last_seq=0)
        await client.until(lambda m: m["type"] == "replay_done")
        child = asyncio.create_task(
            manage(env, "notebook", "send", str(notebook.pk), "Hello?")
        )
        await client.until_event("agent_input", timeout=60)  # the child's call is out
        while not server.requests:
            await asyncio.sleep(0.05)

        pressed = time.monotonic()
        stop = await client.reply_to(await client.send("abandon"))
        assert stop["type"] == "ack", stop
        await client.until_event("task_abandoned", timeout=30)
        took = time.monotonic() - pressed
        code, output = await asyncio.wait_for(child, timeout=60)
        await client.close()
    print(f"\nStop in this process -> task_abandoned from the child: {took:.2f} s")
    assert code == 0, output

    # the child hung up on the model instead of waiting for it
    assert len(server.requests) == 1
    deadline = time.monotonic() + 10
    while server.requests[0].error is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert server.requests[0].error == "client disconnected"

    # as before the step: nothing of the turn is left in the conversation, nothing runs
    task = await Task.objects.aget(pk=notebook.pk)
    assert task.status == "idle" and task.lease_owner == ""
    assert not task.abandon_requested
    assert await Step.objects.filter(task=notebook, status="running").acount() == 0
    assert await Step.objects.filter(task=notebook, status="completed").acount() == 0
    turn = await Turn.objects.aget(task=notebook)
    assert turn.status == "abandoned"
    assert await Message.objects.filter(task=notebook, status="active").acount() == 0
