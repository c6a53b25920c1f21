"""A socket whose queue overflowed still gets every stored event, once, in order, without reconnecting.

Both channel layers drop a message when a socket's queue is full (and count it: `dropped`). Here the socket's reads are paused while a whole turn runs
(as on a server too busy to read its queues), with a queue of `CAPACITY` messages: the turn's
later events, its last one (`task_completed`) included, are dropped, and no later event comes
to reveal the gap. The socket must still send them all, from the Event table.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers, get_channel_layer
from django.test import override_settings

from runs import service
from runs.models import Event
from runs.realtime.publisher import existing_publisher
from tests.live_support import (
    QUESTION,
    Client,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_notebook,
    make_user,
    server,  # noqa: F401  (fixture: the analyst script's model, as the LLM)
)

pytestmark = [pytest.mark.ws, pytest.mark.db, pytest.mark.django_db(transaction=True)]

CAPACITY = 4


def layer_config(kind: str, request: Any) -> dict[str, Any]:
    if kind == "in-memory":
        return {
            "BACKEND": "tests.faulty_layers.PausableInMemoryLayer",
            "CONFIG": {"capacity": CAPACITY},
        }
    url = request.getfixturevalue("redis_url")
    return {
        "BACKEND": "tests.faulty_layers.PausableRedisLayer",
        "CONFIG": {
            "hosts": [{"address": url, "socket_timeout": 30}],
            "capacity": CAPACITY,
            "prefix": f"agentui-test-{uuid.uuid4().hex}",  # others may share the Redis
        },
    }


async def all_sent(task_pk: int) -> None:
    """Until this process's publisher of the notebook has sent (or dropped) all it emitted."""
    publisher = existing_publisher(task_pk)
    while publisher is not None and publisher.sending():
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    "kind", ["in-memory", pytest.param("redis", marks=pytest.mark.redis)]
)
async def test_a_socket_whose_queue_overflowed_gets_every_stored_event_once_in_order(
    server: Any,  # noqa: F811
    request: Any,
    kind: str,
) -> None:
    layers = {"default": layer_config(kind, request)}
    with override_settings(CHANNEL_LAYERS=layers):
        channel_layers.backends.pop("default", None)  # built from the settings above
        client = None
        try:
            user = await database_sync_to_async(make_user)()
            task = await database_sync_to_async(make_notebook)(user)
            client = await Client.open(user, task.pk)
            await client.send("resume", last_seq=0)
            await client.until(lambda m: m["type"] == "replay_done")
            layer = get_channel_layer()
            layer.pause_reads()
            await client.ok("send_message", text=QUESTION)
            await asyncio.wait_for(service.wait_idle(), 30)
            await asyncio.wait_for(all_sent(task.pk), 30)
            stored = [
                (seq, kind)
                async for seq, kind in Event.objects.filter(task=task)
                .order_by("seq")
                .values_list("seq", "type")
            ]
            # more events than the queue holds (and tokens besides): the last ones were dropped
            assert len(stored) > CAPACITY + 1 and stored[-1][1] == "task_completed"
            assert layer.dropped > 0
            layer.resume_reads()
            await client.until_event("task_completed", timeout=20)
            assert client.seqs() == [seq for seq, _ in stored]
        finally:
            if client is not None:
                await client.close()
            channel_layers.backends.pop("default", None)
