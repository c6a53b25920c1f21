"""agentui.redis_layer: what waits for a process is received in one round trip, nothing lost.

On a private redis-server (so its command counts are ours alone): messages for the sockets of a
process arrive whole, once and in order, and taking them costs one script call however many
there are, where channels-redis pays a blocking pop (and three more commands) per message. A
receive interrupted while its batch is on the way loses nothing: the next one gets the batch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import redis as redis_sync
from channels_redis.core import RedisChannelLayer
from redis_process import RedisProcess

from agentui.redis_layer import RedisLayer

pytestmark = pytest.mark.redis


@pytest.fixture
def private_redis(tmp_path: Path, require_service: Any) -> Any:
    redis = RedisProcess(tmp_path)
    if redis.binary is None:
        require_service(
            "redis-server", "no redis-server binary (apt-get install -y redis-server)"
        )
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()


def calls(url: str) -> dict[str, int]:
    """Commands Redis has run so far, by name."""
    client = redis_sync.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


async def sent_and_received(
    layer: RedisChannelLayer, url: str, messages: int
) -> tuple[list[list[int]], dict[str, int]]:
    """`messages` group messages to three sockets of one process; what each received, and
    the pops and scripts that took."""
    sockets = [await layer.new_channel() for _ in range(3)]
    for channel in sockets:
        await layer.group_add("nb-1", channel)
    for n in range(messages):
        await layer.group_send("nb-1", {"type": "notebook.delta", "n": n})
    before = calls(url)
    got = [
        [(await layer.receive(channel))["n"] for _ in range(messages)]
        for channel in sockets
    ]
    after = calls(url)
    spent = {
        name: after.get(name, 0) - before.get(name, 0)
        for name in ("bzpopmin", "zpopmin")
    }
    await layer.flush()
    return got, spent


async def test_a_process_takes_what_waits_for_it_in_one_round_trip(
    private_redis: RedisProcess,
) -> None:
    url = private_redis.url
    ours, ours_spent = await sent_and_received(RedisLayer(hosts=[url]), url, 40)
    theirs, theirs_spent = await sent_and_received(
        RedisChannelLayer(hosts=[url]), url, 40
    )
    assert ours == theirs == [list(range(40))] * 3
    # channels-redis: a blocking pop (and a backup pop) per message in the process's key
    assert theirs_spent["bzpopmin"] == 40
    # ours: one pop of all 40 (each carries all three sockets' copies), in one script
    assert ours_spent == {"bzpopmin": 0, "zpopmin": 1}


async def test_an_interrupted_receive_loses_nothing(
    private_redis: RedisProcess,
) -> None:
    layer = RedisLayer(hosts=[private_redis.url])
    channel = await layer.new_channel()
    # interrupted at every point of its way: before, during and after its script
    for passes in range(40):
        sent = list(range(passes * 5, passes * 5 + 5))
        for n in sent:
            await layer.send(channel, {"type": "notebook.delta", "n": n})
        interrupted = asyncio.create_task(layer.receive(channel))
        for _ in range(passes):
            await asyncio.sleep(0)
        interrupted.cancel()
        got = []
        try:
            got.append((await interrupted)["n"])
        except asyncio.CancelledError:
            pass
        while len(got) < 5:
            got.append((await asyncio.wait_for(layer.receive(channel), 10))["n"])
        assert sorted(got) == sent, passes
    await layer.flush()


async def group_sends(kind: type[RedisChannelLayer], url: str) -> list[Any]:
    """Two processes' sockets in a group, one process's key over its capacity; what arrives."""
    first, second = kind(hosts=[url], capacity=3), kind(hosts=[url], capacity=3)
    a1, a2 = await first.new_channel(), await first.new_channel()
    b1 = await second.new_channel()
    for channel in (a1, a2, b1):
        await first.group_add("nb-2", channel)
    await first.group_add("nb-3", b1)
    for n in range(5):  # the first process's key holds 3: messages 3 and 4 do not fit
        await second.group_send("nb-2", {"type": "notebook.delta", "n": n})
    got: list[Any] = [
        [(await layer.receive(c))["n"] for _ in range(3)]
        for layer, c in ((first, a1), (first, a2), (second, b1))
    ]
    await first.group_send("nb-3", {"type": "notebook.delta", "n": 99})
    await first.group_send("nobody", {"type": "notebook.delta", "n": -1})
    got.append((await second.receive(b1))["n"])
    await first.group_discard("nb-2", a2)
    await second.group_send("nb-2", {"type": "notebook.event", "seq": 7})
    got.append(await first.receive(a1))
    got.append(await second.receive(b1))
    await first.flush()
    return got


async def test_group_sends_arrive_and_overflow_as_with_channels_redis(
    private_redis: RedisProcess,
) -> None:
    ours = await group_sends(RedisLayer, private_redis.url)
    theirs = await group_sends(RedisChannelLayer, private_redis.url)
    assert ours == theirs
    assert ours[:4] == [[0, 1, 2], [0, 1, 2], [0, 1, 2], 99]
