"""A channel layer that fails or hangs costs live updates only: steps run and their events are stored."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from django.test import override_settings

from runs import service
from runs.models import Event, Step, Task
from runs.realtime import broadcast
from tests.live_support import (
    ANSWER,
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fresh_layer_health() -> Any:
    broadcast.health.__init__()  # type: ignore[misc]
    yield
    broadcast.health.__init__()  # type: ignore[misc]


def failing_layer(name: str, timeout: float) -> Any:
    layers = {"default": {"BACKEND": f"tests.faulty_layers.{name}"}}
    return override_settings(CHANNEL_LAYERS=layers, AGENTUI_BROADCAST_TIMEOUT_S=timeout)


# A hanging layer with a send timeout longer than the test: storing must not wait for sending.
@pytest.mark.parametrize(
    ("layer", "timeout"), [("RaisingLayer", 5.0), ("HangingLayer", 600.0)]
)
async def test_a_turn_with_parallel_tool_calls_finishes_and_is_stored_when_the_layer_fails(
    scripted_server: Any, fresh_layer_health: Any, layer: str, timeout: float
) -> None:
    server = scripted_server(analyst_script())
    with failing_layer(layer, timeout), llm_at(server):
        channel_layers.backends.pop(
            "default", None
        )  # built again from the overridden settings
        try:
            user = await database_sync_to_async(make_user)()
            task = await database_sync_to_async(make_notebook)(user)
            await service.send_message(task.pk, QUESTION)
            await asyncio.wait_for(service.wait_idle(), 30)
        finally:
            channel_layers.backends.pop("default", None)
    payloads = [
        e.payload async for e in Event.objects.filter(task=task).order_by("seq")
    ]
    seqs = [
        s
        async for s in Event.objects.filter(task=task)
        .order_by("seq")
        .values_list("seq", flat=True)
    ]
    assert seqs == list(range(1, len(seqs) + 1))
    assert [p["type"] for p in payloads].count("tool_call_result") == 2
    assert (
        payloads[-1]["type"] == "task_completed" and payloads[-1]["response"] == ANSWER
    )
    assert (
        await Step.objects.filter(task=task).exclude(status="completed").acount() == 0
    )
    notebook = await Task.objects.aget(pk=task.pk)
    assert notebook.lease_owner == "" and notebook.status == "idle"
