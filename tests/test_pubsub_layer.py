"""The Redis channel layer (agentui/pubsub_layer.py) against a private `redis-server`.

A group message is one PUBLISH however many sockets of the process are in the group; a full
socket queue drops and counts; Redis going away reaches the receivers, and the layer works again
once Redis is back (redis-py subscribes again by itself).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from agentui import pubsub_layer
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


async def send_after_restart(layer: PubSubLayer, group: str, n: str) -> None:
    """A group message once Redis is back: a pooled connection from before the restart fails
    once (redis-py drops it and the next try takes a new one)."""
    for _ in range(2):
        try:
            await layer.group_send(group, {"type": "t", "n": n})
            return
        except redis.ConnectionError:
            continue
    await layer.group_send(group, {"type": "t", "n": n})


def lost_queue_full() -> float:
    return metrics.layer_lost.labels(metrics.PROCESS, "queue_full")._value.get()


async def test_a_group_message_is_published_once_for_all_sockets_of_the_group(
    private_redis: RedisProcess, layer: PubSubLayer
) -> None:
    other_process = layer_at(
        private_redis.url
    )  # subscribes too: every message must go out
    try:
        remote = await other_process.new_channel()
        await other_process.group_add("notebook-1", remote)
        sockets = [await layer.new_channel() for _ in range(3)]
        for channel in sockets:
            await layer.group_add("notebook-1", channel)
        before = publishes(private_redis.url)
        for n in range(5):
            await layer.group_send("notebook-1", {"type": "t", "n": n})
        for channel in sockets:
            got = [(await layer.receive(channel))["n"] for _ in range(5)]
            assert got == [0, 1, 2, 3, 4]
        assert [(await other_process.receive(remote))["n"] for _ in range(5)] == [
            0,
            1,
            2,
            3,
            4,
        ]
        assert publishes(private_redis.url) - before == 5  # not 15
    finally:
        await other_process.flush()


async def test_a_process_alone_in_a_group_keeps_its_messages_out_of_redis_in_order(
    private_redis: RedisProcess, layer: PubSubLayer
) -> None:
    sockets = [await layer.new_channel() for _ in range(2)]
    side = await layer.new_channel()

    async def round_trip() -> None:
        """One message through Redis and back: what was published before it has come back."""
        await layer.send(side, {"type": "t", "n": "tick"})
        assert (await layer.receive(side))["n"] == "tick"

    await round_trip()  # the subscription's reader runs
    for channel in sockets:
        await layer.group_add("notebook-6", channel)
    before = publishes(private_redis.url)
    for n in range(200):
        await layer.group_send("notebook-6", {"type": "t", "n": n})
        if n % 10 == 9:
            await round_trip()
    for channel in sockets:
        assert [(await layer.receive(channel))["n"] for _ in range(200)] == list(
            range(200)
        )
        assert layer._get_layer().channels[channel].empty()  # and nothing twice
    # the first ten went through Redis (in flight together, then the last one's copy came
    # back with one receiver); the other 190 went straight to the queues; 20 round trips
    assert publishes(private_redis.url) - before == 10 + 20


async def test_a_process_that_joins_a_group_is_heard_and_gets_every_message_after(
    private_redis: RedisProcess, layer: PubSubLayer
) -> None:
    mine = await layer.new_channel()
    await layer.group_add("notebook-7", mine)
    await layer.group_send("notebook-7", {"type": "t", "n": "first"})
    assert (await layer.receive(mine))["n"] == "first"
    sending = layer._get_layer()
    group_channel = sending._get_group_channel_name("notebook-7")
    assert group_channel in sending._alone  # its own copy came back: alone

    other_process = layer_at(private_redis.url)
    try:
        remote = await other_process.new_channel()
        await other_process.group_add("notebook-7", remote)  # announces itself
        async with asyncio.timeout(10):
            while (
                group_channel in sending._alone
            ):  # the announcement reaches the sender
                await layer.send(
                    mine, {"type": "t", "n": "tick"}
                )  # one loop turn via Redis
                assert (await layer.receive(mine))["n"] == "tick"
        for n in range(20):
            await layer.group_send("notebook-7", {"type": "t", "n": n})
        assert [(await layer.receive(mine))["n"] for _ in range(20)] == list(range(20))
        assert [(await other_process.receive(remote))["n"] for _ in range(20)] == list(
            range(20)
        )
        assert group_channel not in sending._alone  # two subscribers: it publishes
        await other_process.group_discard("notebook-7", remote)
        async with asyncio.timeout(10):  # once Redis has seen the other leave
            while group_channel not in sending._alone:
                await layer.group_send("notebook-7", {"type": "t", "n": "alone again"})
                assert (await layer.receive(mine))["n"] == "alone again"
        await layer.group_discard("notebook-7", mine)
        # nothing kept once its sockets left
        assert group_channel not in sending._alone
    finally:
        await other_process.flush()


async def test_being_alone_lasts_a_bounded_time_then_redis_is_asked_again(
    private_redis: RedisProcess, layer: PubSubLayer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pubsub_layer, "ALONE_FOR_S", 0.2)
    mine = await layer.new_channel()
    await layer.group_add("notebook-8", mine)
    await layer.group_send("notebook-8", {"type": "t", "n": 0})
    assert (await layer.receive(mine))["n"] == 0
    group_channel = layer._get_layer()._get_group_channel_name("notebook-8")
    until = layer._get_layer()._alone[group_channel]
    before = publishes(private_redis.url)
    await layer.group_send("notebook-8", {"type": "t", "n": 1})  # kept local
    assert (await layer.receive(mine))["n"] == 1
    assert publishes(private_redis.url) == before
    while time.monotonic() <= until:  # the bound passes (0.2 s)
        await asyncio.sleep(0.05)
    await layer.group_send("notebook-8", {"type": "t", "n": 2})
    assert (await layer.receive(mine))["n"] == 2
    assert publishes(private_redis.url) == before + 1  # asked Redis again


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
    await send_after_restart(layer, "notebook-3", "back")
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
    await send_after_restart(layer, "notebook-4", "after")
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
