"""agentui.inmemory_layer delivers and drops exactly what Channels' in-memory layer does.

The same script of sends, group sends and receives runs against both; what arrives, in what
order, and which sends raise `ChannelFull` must be the same. Its own shortcuts (no queue built
per call, a shallow copy of flat messages) must still give every receiver a copy of its own.
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

from agentui.inmemory_layer import InMemoryLayer


async def script(layer: InMemoryChannelLayer) -> list[Any]:
    """Group and direct sends past the capacity, then every receive; returns what happened."""
    seen: list[Any] = []
    a = await layer.new_channel()
    b = await layer.new_channel()
    await layer.group_add("nb-1", a)
    await layer.group_add("nb-1", b)
    await layer.group_add("nb-2", b)
    for n in range(3):
        await layer.send(a, {"type": "notebook.reply", "n": n})
    # a has room for one more: it gets t0, misses t1 and t2; b, later in the group, gets all three
    for n in range(3):
        await layer.group_send("nb-1", {"type": "notebook.delta", "text": f"t{n}"})
    await layer.group_send(
        "nb-2", {"type": "notebook.event", "seq": 1, "event": {"type": "x"}}
    )
    await layer.group_send("nobody", {"type": "notebook.delta", "text": "lost"})
    for n in range(3, 5):
        try:
            await layer.send(a, {"type": "notebook.reply", "n": n})
            seen.append(("sent", n))
        except ChannelFull:
            seen.append(("full", n))
    for channel in (a, b):
        while (queue := layer.channels.get(channel)) is not None and not queue.empty():
            message = await layer.receive(channel)
            seen.append(("got", channel == a, message))
    await layer.group_discard("nb-1", b)
    await layer.group_send("nb-1", {"type": "notebook.delta", "text": "after"})
    seen.append(("got", True, await layer.receive(a)))
    # (an emptied queue is dropped at once by Channels, by ours' sweep: see the test below)
    seen.append(
        (
            "channels holding messages",
            sum(not q.empty() for q in layer.channels.values()),
        )
    )
    return seen


async def test_delivers_and_drops_as_channels_does() -> None:
    ours = await script(InMemoryLayer(capacity=4))
    theirs = await script(InMemoryChannelLayer(capacity=4))
    assert ours == theirs
    # the script does reach the capacity: a's queue holds 4 and refuses more
    assert ("full", 3) in ours and ("full", 4) in ours
    assert [m for _, to_a, m in (s for s in ours if s[0] == "got") if to_a][3:] == [
        {"type": "notebook.delta", "text": "t0"},
        {"type": "notebook.delta", "text": "after"},
    ]
    # b got its three deltas and the event; a lost nothing it had room for
    assert [m for _, to_a, m in (s for s in ours if s[0] == "got") if not to_a] == [
        {"type": "notebook.delta", "text": "t0"},
        {"type": "notebook.delta", "text": "t1"},
        {"type": "notebook.delta", "text": "t2"},
        {"type": "notebook.event", "seq": 1, "event": {"type": "x"}},
    ]


async def test_every_receiver_gets_a_copy_of_its_own() -> None:
    layer = InMemoryLayer()
    members = [await layer.new_channel() for _ in range(2)]
    for channel in members:
        await layer.group_add("nb", channel)
    flat = {"type": "notebook.delta", "text": "hello"}
    nested = {"type": "notebook.event", "seq": 3, "event": {"delta": ["a"]}}
    await layer.group_send("nb", flat)
    await layer.group_send("nb", nested)
    first = [await layer.receive(members[0]) for _ in range(2)]
    second = [await layer.receive(members[1]) for _ in range(2)]
    assert first == second == [flat, nested]
    first[0]["text"] = "changed by one receiver"
    first[1]["event"]["delta"].append("b")
    assert second == [
        {"type": "notebook.delta", "text": "hello"},
        {"type": "notebook.event", "seq": 3, "event": {"delta": ["a"]}},
    ]


async def test_a_waiting_receiver_gets_the_next_message() -> None:
    layer = InMemoryLayer()
    channel = await layer.new_channel()
    waiting = asyncio.create_task(layer.receive(channel))
    await asyncio.sleep(0)
    await layer.send(channel, {"type": "notebook.delta", "text": "x"})
    assert await asyncio.wait_for(waiting, 5) == {
        "type": "notebook.delta",
        "text": "x",
    }


async def test_a_reading_channel_keeps_its_queue_and_an_idle_one_is_swept() -> None:
    """A socket reads each message as it comes: its queue is not rebuilt per message, and the
    queue of a channel nobody reads any more goes with the next sweep."""
    layer = InMemoryLayer()
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "notebook.delta", "text": "a"})
    queue = layer.channels[channel]
    await layer.receive(channel)
    waiting = asyncio.create_task(layer.receive(channel))
    await asyncio.sleep(0)
    assert layer.channels[channel] is queue  # emptied, but read again at once: kept
    layer._swept_at = 0.0
    layer._clean_expired()
    assert layer.channels[channel] is queue  # the sweep leaves a channel being read
    await layer.send(channel, {"type": "notebook.delta", "text": "b"})
    assert await asyncio.wait_for(waiting, 5) == {"type": "notebook.delta", "text": "b"}
    assert layer.channels.get(channel) is queue
    layer._swept_at = 0.0
    layer._clean_expired()
    assert (
        channel not in layer.channels
    )  # nobody reads it: an idle channel holds no queue
