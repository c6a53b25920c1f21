"""Redis stopped for real in the middle of a run, then started again (issue 16, item 1).

The channel layer is a private `redis-server` (tests/redis_process.py), so the shared Redis of
the services pass is never touched; the test runs on both database backends.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from django.test import AsyncClient, override_settings

from agentui.settings import _channel_layers
from runs import service
from runs.engine.testing import Match, Reply, Rule, Script, Timing, ToolCallSpec
from runs.models import Event, Task
from runs.realtime import broadcast
from tests.live_support import (
    Client,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)
from tests.redis_process import RedisProcess, running

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]

SLOW = Timing(token_delay_s=0.05)


@pytest.fixture
def private_redis(tmp_path: Path, require_service: Any) -> Any:
    with running(tmp_path, require_service) as redis:
        layers = _channel_layers(redis.url)  # what REDIS_URL gives a server
        broadcast.health.__init__()  # type: ignore[misc]
        with override_settings(CHANNEL_LAYERS=layers, AGENTUI_BROADCAST_TIMEOUT_S=2.0):
            channel_layers.backends.pop("default", None)
            try:
                yield redis
            finally:
                channel_layers.backends.pop("default", None)
                broadcast.health.__init__()  # type: ignore[misc]


def streaming_tool_script() -> Script:
    """A turn that streams, calls a tool, then streams its answer; then a plain reply."""
    return Script(
        rules=[
            Rule(
                name="call",
                match=Match(last_user_contains="Compute", tool_results_since_user=0),
                timing=SLOW,
                reply=Reply(
                    text="Let me add those numbers for you now.",
                    tool_calls=[
                        ToolCallSpec(
                            name="add", arguments={"a": 2, "b": 3}, id="call_add"
                        )
                    ],
                ),
            ),
            Rule(
                name="answer",
                match=Match(tool_results_since_user=1),
                timing=SLOW,
                reply=Reply(text="The sum of two and three is five, as computed."),
            ),
            Rule(name="chat", reply=Reply(text="Back again and live.")),
        ]
    )


async def test_a_run_survives_redis_going_away_and_the_page_catches_up(
    private_redis: RedisProcess, scripted_server: Any
) -> None:
    server = scripted_server(streaming_tool_script())
    with llm_at(server):
        user = await database_sync_to_async(make_user)()
        notebook = await database_sync_to_async(make_notebook)(user)
        client = await Client.open(user, notebook.pk)
        await client.send("resume", last_seq=0)
        await client.until(lambda m: m["type"] == "replay_done")
        await client.send("send_message", text="Compute 2 + 3")
        await client.until(
            lambda m: m["type"] == "delta"
        )  # streaming: now take Redis away
        private_redis.stop()

        assert (await client.until(lambda m: m["type"] == "live", timeout=10))[
            "live"
        ] is False
        # the run goes on and is stored; the page gets its events from the database meanwhile
        done = await client.until_event("task_completed", timeout=30)
        assert (
            done["event"]["response"]
            == "The sum of two and three is five, as computed."
        )
        await asyncio.wait_for(service.wait_idle(), 30)
        assert (await Task.objects.aget(pk=notebook.pk)).status == "idle"

        # a new notebook can still be created (and runs) while Redis is down
        http = AsyncClient()
        await http.aforce_login(user)
        created = await asyncio.wait_for(
            http.post(
                "/tasks/new",
                {"text": "Hello?", "agent": "function_calling", "mode": "auto"},
            ),
            30,
        )
        assert created.status_code == 302
        await asyncio.wait_for(service.wait_idle(), 30)

        private_redis.start()
        restored = await client.until(lambda m: m["type"] == "live", timeout=15)
        assert restored["live"] is True
        await client.send("send_message", text="Are you there?")
        back = await client.until_event("task_completed", timeout=30)
        assert back["event"]["response"] == "Back again and live."
        since = client.messages[client.messages.index(restored) :]
        assert any(m["type"] == "delta" for m in since)  # tokens stream live again
        await asyncio.wait_for(service.wait_idle(), 30)
        stored = [
            s
            async for s in Event.objects.filter(task=notebook)
            .order_by("seq")
            .values_list("seq", flat=True)
        ]
        assert (
            client.seqs() == stored == list(range(1, len(stored) + 1))
        )  # each event once, none lost
        await client.close()

        # a socket opened after Redis came back is served (it was closed with 1011 once)
        fresh = await Client.open(user, notebook.pk)
        await fresh.send("resume", last_seq=0)
        done = await fresh.until(lambda m: m["type"] == "replay_done", timeout=15)
        assert fresh.seqs() == stored and done["last_seq"] == stored[-1]
        await fresh.close()
