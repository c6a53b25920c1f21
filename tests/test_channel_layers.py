"""Group fan-out through the channel layer, in one process and across processes.

The Redis tests run in `make test`'s services pass, where REDIS_URL and a
PostgreSQL DATABASE_URL are set; the in-memory ones run in both passes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from conftest import ROOT
from django.contrib.auth.models import User
from django.db import connection
from django.urls import path

from agentui.settings import _channel_layers


class GroupConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Joins the group named in the URL and forwards `fanout.message` events."""

    async def connect(self) -> None:
        self.group = self.scope["url_route"]["kwargs"]["group"]
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def fanout_message(self, event: dict[str, Any]) -> None:
        await self.send_json({"text": event["text"]})


app = URLRouter([path("ws/groups/<str:group>/", GroupConsumer.as_asgi())])

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Run in a child process: send one event to the group named in argv[1].
SEND_FROM_ANOTHER_PROCESS = """
import os, sys
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

layer = get_channel_layer()
assert type(layer).__name__ == "PubSubLayer", type(layer)
async_to_sync(layer.group_send)(sys.argv[1], {"type": "fanout.message", "text": f"from {os.getpid()}"})
"""


def new_group() -> str:
    return f"agentui-test-{uuid.uuid4().hex}"  # unique: other runs may share the Redis


async def connected(group: str) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(app, f"/ws/groups/{group}/")
    accepted, _ = await communicator.connect()
    assert accepted
    return communicator


async def fan_out_to_two_sockets() -> None:
    group = new_group()
    sockets = [await connected(group), await connected(group)]
    try:
        await get_channel_layer().group_send(
            group, {"type": "fanout.message", "text": "hi all"}
        )
        for socket in sockets:
            assert await socket.receive_json_from(timeout=5) == {"text": "hi all"}
    finally:
        for socket in sockets:
            await socket.disconnect()


# Channels closes old DB connections around consumer messages, so websocket
# tests need transactional database access.
@pytest.mark.parametrize("layer", ["in-memory", "configured"])
@pytest.mark.ws
@pytest.mark.django_db(transaction=True)
async def test_group_send_reaches_every_socket_in_the_group(
    settings: Any, layer: str
) -> None:
    if layer == "in-memory":
        settings.CHANNEL_LAYERS = IN_MEMORY
    # "configured" is whatever the settings say: Redis in the services pass.
    await fan_out_to_two_sockets()


@pytest.mark.redis
@pytest.mark.ws
@pytest.mark.django_db(transaction=True)
async def test_group_send_from_another_process_reaches_the_socket(
    settings: Any, redis_url: str, subprocess_env: Callable[..., dict[str, str]]
) -> None:
    settings.CHANNEL_LAYERS = _channel_layers(
        redis_url
    )  # what REDIS_URL gives the child
    group = new_group()
    socket = await connected(group)
    try:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SEND_FROM_ANOTHER_PROCESS,
            group,
            env=subprocess_env(REDIS_URL=redis_url),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(child.communicate(), timeout=60)
        assert child.returncode == 0, stderr.decode()
        assert await socket.receive_json_from(timeout=5) == {
            "text": f"from {child.pid}"
        }
    finally:
        await socket.disconnect()


@pytest.mark.db
@pytest.mark.postgres
@pytest.mark.django_db
def test_services_pass_really_uses_postgres() -> None:
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        assert "PostgreSQL" in cursor.fetchone()[0]
    User.objects.create_user("pg-roundtrip", first_name=json.dumps({"ok": True}))
    assert json.loads(User.objects.get(username="pg-roundtrip").first_name) == {
        "ok": True
    }
