"""The Redis channel layer (agentui/pubsub_layer.py) against a private `redis-server`.

A group message is one PUBLISH however many sockets of the process are in the group; a full
socket queue drops and counts; Redis going away reaches the receivers, and the layer works again
once Redis is back (redis-py subscribes again by itself).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis

from agentui.pubsub_layer import LayerDown, PubSubLayer
from agentui.settings import _channel_layers
from runs.telemetry import metrics
from tests.redis_process import RedisProcess, running

pytestmark = pytest.mark.ws


@pytest.fixture
def private_redis(tmp_path: Path, require_service: Any) -> Any:
    with running(tmp_path, require_service) as server:
        yield server


@pytest.fixture
async def layer(private_redis: RedisProcess) -> Any:
    made = layer_at(private_redis.url)
    try:
        yield made
    finally:
        await made.flush()


def layer_at(url: str, capacity: int = 1000) -> PubSubLayer:
    config: dict[str, Any] = dict(_channel_layers(url)["default"]["CONFIG"])  # type: ignore[arg-type]
    return PubSubLayer(**{**config, "capacity": capacity})


def publishes(url: str) -> int:
    stats = redis.Redis.from_url(url).info("commandstats")
    return int(stats.get("cmdstat_publish", {}).get("calls", 0))


def lost_queue_full() -> float:
    return metrics.layer_lost.labels(metrics.PROCESS, "queue_full")._value.get()


async def test_a_group_message_is_published_once_for_all_sockets_of_the_group(
    private_redis: RedisProcess, layer: PubSubLayer
) -> None:
    sockets = [await layer.new_channel() for _ in range(3)]
    for channel in sockets:
        await layer.group_add("notebook-1", channel)
    before = publishes(private_redis.url)
    for n in range(5):
        await layer.group_send("notebook-1", {"type": "t", "n": n})
    for channel in sockets:
        got = [(await layer.receive(channel))["n"] for _ in range(5)]
        assert got == [0, 1, 2, 3, 4]
    assert publishes(private_redis.url) - before == 5  # not 15


async def test_a_full_socket_queue_drops_counts_and_keeps_the_order_of_the_rest(
    private_redis: RedisProcess,
) -> None:
    layer = layer_at(private_redis.url, capacity=4)
    try:
        slow, other = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("notebook-2", slow)
        lost_before = lost_queue_full()
        for n in range(10):
            await layer.group_send("notebook-2", {"type": "t", "n": n})
        # one connection carries both: once `other` has its message, `slow`'s ten were handled
        await layer.send(other, {"type": "t", "n": "after"})
        assert (await layer.receive(other))["n"] == "after"
        assert layer.dropped == 6
        assert lost_queue_full() - lost_before == 6
        assert [(await layer.receive(slow))["n"] for _ in range(4)] == [0, 1, 2, 3]
    finally:
        await layer.flush()


async def test_redis_going_away_reaches_the_receivers_and_the_layer_recovers(
    private_redis: RedisProcess, layer: PubSubLayer
) -> None:
    channel = await layer.new_channel()
    await layer.group_add("notebook-3", channel)
    waiting = asyncio.ensure_future(layer.receive(channel))
    private_redis.stop()
    with pytest.raises(LayerDown):
        await asyncio.wait_for(waiting, 10)
    with pytest.raises(redis.ConnectionError):  # a socket's rejoin fails meanwhile
        await layer.group_add("notebook-3", channel)

    private_redis.start()  # an empty Redis: no subscription survived on its side
    await layer.group_add("notebook-3", channel)
    await layer.group_send("notebook-3", {"type": "t", "n": "back"})
    assert (await asyncio.wait_for(layer.receive(channel), 10))["n"] == "back"


async def test_a_redis_restart_between_two_reads_reaches_the_receivers(
    private_redis: RedisProcess, layer: PubSubLayer
) -> None:
    channel = await layer.new_channel()
    await layer.group_add("notebook-4", channel)
    await layer.group_send("notebook-4", {"type": "t", "n": "before"})
    assert (await asyncio.wait_for(layer.receive(channel), 10))["n"] == "before"
    # stopped and started again at once: redis-py may reconnect within one read, raising
    # nothing; either way what was published meanwhile is lost, and the socket must know
    private_redis.stop()
    private_redis.start()
    with pytest.raises(LayerDown):
        await asyncio.wait_for(layer.receive(channel), 10)
    await layer.group_add("notebook-4", channel)
    for _ in range(3):  # a pooled connection from before the restart fails once
        try:
            await layer.group_send("notebook-4", {"type": "t", "n": "after"})
            break
        except redis.ConnectionError:
            continue
    assert (await asyncio.wait_for(layer.receive(channel), 10))["n"] == "after"


async def test_a_channel_that_left_its_group_between_two_reads_is_forgotten(
    private_redis: RedisProcess, layer: PubSubLayer
) -> None:
    client = redis.Redis.from_url(private_redis.url)
    channel = await layer.new_channel()
    await layer.group_add("notebook-5", channel)
    await layer.group_send("notebook-5", {"type": "t", "n": 1})
    assert (await asyncio.wait_for(layer.receive(channel), 10))["n"] == 1
    assert client.pubsub_numsub(channel) == [(channel.encode(), 1)]
    await layer.group_discard("notebook-5", channel)  # nobody reads it now
    loop_layer = layer._get_layer()
    assert channel not in loop_layer.channels
    assert (
        channel not in loop_layer._get_shard(channel)._subscribed_to
    )  # UNSUBSCRIBE sent

    waiting = await layer.new_channel()  # a socket whose read is still waiting keeps it
    await layer.group_add("notebook-5", waiting)
    reading = asyncio.ensure_future(layer.receive(waiting))
    await layer.group_send("notebook-5", {"type": "t", "n": 2})
    assert (await asyncio.wait_for(reading, 10))["n"] == 2
    reading = asyncio.ensure_future(layer.receive(waiting))
    await asyncio.sleep(0)  # the read has started waiting
    await layer.group_discard("notebook-5", waiting)
    assert waiting in loop_layer.channels
    reading.cancel()
