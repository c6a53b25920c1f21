"""Across processes through Redis: the socket is served here, the step runs in another process.

The other process is `manage.py notebook ...` on the same (test) database and Redis; its events
reach this process's socket only through the Redis channel layer. Needs PostgreSQL (a second
process cannot open the SQLite test database) and Redis: make test's services pass.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from agentui import pubsub_layer
from runs import service
from runs.models import Step
from tests.live_support import (
    ANSWER,
    QUESTION,
    Client,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [
    pytest.mark.redis,
    pytest.mark.postgres,
    pytest.mark.ws,
    pytest.mark.db,
    pytest.mark.django_db(transaction=True),
]

ROOT = Path(__file__).resolve().parents[1]


def child_database_url() -> str:
    """A URL for the database this test process uses (pytest-django's test database)."""
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


async def manage(env: dict[str, str], *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "manage.py"),
        *args,
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, output.decode()


@pytest.fixture
def child_env(scripted_server: Any, subprocess_env: Any, redis_url: str) -> Any:
    server = scripted_server(analyst_script())
    env = subprocess_env(
        DATABASE_URL=child_database_url(),
        REDIS_URL=redis_url,
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="sk-test",
        AGENTUI_MODEL="scripted",
    )
    with llm_at(server):
        yield server, env


async def test_a_turn_run_by_another_process_streams_to_this_socket(
    child_env: Any,
) -> None:
    server, env = child_env
    layer = settings.CHANNEL_LAYERS["default"]
    assert layer["BACKEND"] == "agentui.pubsub_layer.PubSubLayer"
    assert layer["CONFIG"]["hosts"][0]["address"] == env["REDIS_URL"]
    user = await database_sync_to_async(make_user)()
    notebook = await database_sync_to_async(make_notebook)(user)
    client = await Client.open(user, notebook.pk)
    await client.send("resume", last_seq=0)
    await client.until(lambda m: m["type"] == "replay_done")

    child = asyncio.create_task(
        manage(env, "notebook", "send", str(notebook.pk), QUESTION)
    )
    done = await client.until_event("task_completed", timeout=60)
    code, output = await child
    assert code == 0, output
    assert done["event"]["response"] == ANSWER
    seqs = client.seqs()
    assert seqs == list(range(1, len(seqs) + 1))
    deltas = [m for m in client.messages if m["type"] == "delta"]
    last_step = client.events("step_completed")[-1]["step_id"]
    streamed = "".join(
        d["event"]["delta"] for d in deltas if d["event"]["step_id"] == last_step
    )
    assert streamed == ANSWER  # tokens crossed processes too
    assert len(server.requests) == 2
    assert await Step.objects.filter(task=notebook, status="completed").acount() == 2
    await client.close()


async def test_approvals_from_two_processes_run_the_step_once(child_env: Any) -> None:
    server, env = child_env
    user = await database_sync_to_async(make_user)()
    notebook = await database_sync_to_async(make_notebook)(user, mode="step")
    client = await Client.open(user, notebook.pk)
    await client.send("resume", last_seq=0)
    await client.until(lambda m: m["type"] == "replay_done")
    await client.send("send_message", text=QUESTION)
    step_id = (await client.until_event("step_waiting"))["event"]["step_id"]

    child = asyncio.create_task(
        manage(env, "notebook", "approve", str(notebook.pk), step_id)
    )
    mine = await client.reply_to(await client.send("approve", step_id=step_id))
    code, output = await child
    await service.wait_idle()
    winners = [mine["type"] == "ack", code == 0]
    assert winners.count(True) == 1, (mine, code, output)
    if code != 0:
        assert "already_running" in output
    else:
        assert mine["code"] == "already_running"
    await client.until(
        lambda m: (
            m["type"] == "event"
            and m["event"]["type"] == "step_waiting"
            and m["event"]["step_id"] != step_id
        ),
        timeout=30,
    )
    assert len(server.requests) == 1
    assert [e["step_id"] for e in client.events("step_started")] == [step_id]
    await client.close()


async def test_an_idle_socket_stays_open(
    child_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket with nothing to hear for many of the layer's empty reads is neither closed nor
    told that Redis went away, and its next command works."""
    empty_reads = 0
    enough = asyncio.Event()
    receive = pubsub_layer._Shard._receive_message

    def observed(shard: Any, message: Any) -> None:
        nonlocal empty_reads
        if message is None:
            empty_reads += 1
            if empty_reads >= 30:  # pub/sub reads wait 0.1 s each: ~3 s of silence
                enough.set()
        receive(shard, message)

    monkeypatch.setattr(pubsub_layer._Shard, "_receive_message", observed)
    user = await database_sync_to_async(make_user)()
    notebook = await database_sync_to_async(make_notebook)(user)
    client = await Client.open(user, notebook.pk)
    await client.send("resume", last_seq=0)
    await client.until(lambda m: m["type"] == "replay_done")
    empty_reads = 0
    await asyncio.wait_for(enough.wait(), timeout=60)
    assert not get_channel_layer()._get_layer().down
    await client.send("set_mode", mode="step")
    assert (await client.until_event("mode_changed", timeout=10))["event"][
        "mode"
    ] == "step"
    assert not [m for m in client.messages if m.get("live") is False]
    await client.close()
