"""A stored event reaches the group shaped for sockets by the same database-thread hand-over that
stored it: a large one cut (with where to fetch it whole), a small one as it is, in seq order, and
no second hand-over per event (issue 49: CPU per token)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from runs.engine import AgentOutput
from runs.engine.messages import ChatMessage
from runs.models import group_name
from runs.protocol.wire import WIRE_EVENT_BYTES
from runs.realtime import publisher as publishing
from runs.realtime.publisher import EVENT_MESSAGE, publisher_for
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    make_notebook,
    make_user,
)

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def output(text: str) -> AgentOutput:
    return AgentOutput(task_id="turn", response=ChatMessage.assistant(text))


async def test_stored_events_reach_the_group_shaped_in_one_hand_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    second_hand_overs: list[int] = []

    async def shaped_apart(
        payload: dict[str, Any], task_pk: int, seq: int
    ) -> dict[str, Any]:
        second_hand_overs.append(seq)
        raise AssertionError("shaped in a hand-over of its own")

    monkeypatch.setattr(publishing, "_bounded", shaped_apart)
    user = await database_sync_to_async(make_user)()
    task = await database_sync_to_async(make_notebook)(user)
    layer = get_channel_layer()
    assert layer is not None
    channel = await layer.new_channel()
    await layer.group_add(group_name(task.pk), channel)
    publisher = publisher_for(task.pk)
    big = "x" * (WIRE_EVENT_BYTES * 2)
    seqs = await asyncio.gather(
        publisher.publish(output("small")),
        publisher.publish(output(big)),
        publisher.publish(output("after")),
    )
    received = [await asyncio.wait_for(layer.receive(channel), 10) for _ in seqs]
    assert [m["type"] for m in received] == [EVENT_MESSAGE] * 3
    assert [m["seq"] for m in received] == sorted(seqs) == [1, 2, 3]
    small, cut, after = (m["event"] for m in received)
    assert small["response"]["content"] == "small" and "truncated" not in small
    assert after["response"]["content"] == "after" and "truncated" not in after
    assert len(cut["response"]["content"]) < len(big)
    assert cut["truncated"] and all("url" in part for part in cut["truncated"])
    assert second_hand_overs == []
    assert not publisher.sending() and publisher._shown == {}
