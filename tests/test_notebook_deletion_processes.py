"""Deleting a notebook whose step runs in another server process: the deletion stops it there
through Stop (the other process hears the request, cancels its model call and gives the lease
back), then every row goes; the other process ends without an error and writes nothing after.
Needs PostgreSQL and Redis (make test's services pass), as tests/test_stop_across_processes.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async

from runs import service
from runs.engine.testing import Fault, Reply, Rule, Script
from runs.models import DeletedNotebook, Event, Step, Task, Turn
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

FOREVER = 600.0


async def test_deleting_stops_the_run_in_another_process_first(
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

        record = await service.delete_notebook(user, notebook.pk)
        told = await client.until(lambda m: m["type"] == "deleted", timeout=30)
        code, output = await asyncio.wait_for(child, timeout=60)
        await client.close()

    assert told["notebook"] == notebook.pk
    assert record.stopped_turn
    assert code == 0, output
    assert "Traceback" not in output and "ERROR" not in output, output
    # the stop came first: the child hung up on the model, recorded the stop, gave the lease back
    stops = [e["action"] for e in client.events("human_action")]
    assert stops == ["stopped"]
    assert "task_abandoned" in [e["type"] for e in client.events()]
    assert server.requests[0].error == "client disconnected"
    # and nothing of the notebook is left or came back
    await asyncio.sleep(0.5)
    assert not await Task.objects.filter(pk=notebook.pk).aexists()
    for model in (Turn, Step, Event):
        assert not await model.objects.filter(task_id=notebook.pk).aexists()
    assert await DeletedNotebook.objects.filter(notebook_id=notebook.pk).aexists()
