"""Streamed tokens per layer message: one each while the loop keeps up, gathered when it lags.

A real `Publisher` sends to the in-process layer; the tests count the `delta` messages a
socket's channel receives for a stream and check that every token arrives once, in order,
at the right offset. No timed assertions: the loop's lag is set, not measured.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.layers import get_channel_layer

from runs.engine import AgentStream
from runs.models import group_name
from runs.realtime.pacing import GAIN, LAG_FLOOR_S, MAX_GATHER_S, LoopLag, loop_lag
from runs.realtime.publisher import Publisher
from runs.realtime.streams import StreamRelay
from tests.live_support import until_true

pytestmark = pytest.mark.django_db(transaction=True)  # the streams' text is flushed

IN_MEMORY = {"default": {"BACKEND": "agentui.inmemory_layer.InMemoryLayer"}}
STEP = "step-pacing"


def test_no_gathering_while_the_loop_keeps_up() -> None:
    lag = LoopLag()
    assert lag.gather_s() == 0.0
    for _ in range(1000):
        lag.observe(LAG_FLOOR_S / 2)
    assert lag.gather_s() == 0.0
    for _ in range(1000):
        lag.observe(0.005)
    assert GAIN * 0.005 < MAX_GATHER_S
    assert lag.gather_s() == pytest.approx(GAIN * 0.005, rel=0.01)
    for _ in range(1000):
        lag.observe(1.0)
    assert lag.gather_s() == MAX_GATHER_S


def test_a_floor_gathers_even_while_the_loop_keeps_up() -> None:
    lag = LoopLag()
    assert lag.gather_s(floor=0.04) == 0.04
    assert lag.gather_s(floor=1.0) == MAX_GATHER_S  # never past issue 15's 50 ms
    for _ in range(1000):
        lag.observe(1.0)
    assert lag.gather_s(floor=0.01) == MAX_GATHER_S


def tokens(words: list[str]) -> list[AgentStream]:
    text = ""
    out = []
    for word in words:
        text += word
        out.append(
            AgentStream(
                task_id="t", step_id=STEP, delta=word, response=text, phase="answer"
            )
        )
    return out


async def test_offsets_are_counted_as_a_browser_counts_them() -> None:
    # astral characters are two UTF-16 units; the offset is kept from delta to delta
    words = ["héllo ", "😀", " wörld", "𝄞𝄞", " ", "done"]
    relay = StreamRelay(lambda _: None)
    sent = []
    for event in tokens(words):
        relay.add(event)
        sent.append(json.loads(relay.take(STEP, 0) or "null"))
    assert [m["event"]["delta"] for m in sent] == words
    assert [m["offset"] for m in sent] == [
        len("".join(words[:n]).encode("utf-16-le")) // 2 for n in range(len(words))
    ]
    relay.add(
        tokens(["a", "b", "c"])[2]
    )  # a text that did not grow as the last one: measured
    assert json.loads(relay.take(STEP, 0) or "null")["offset"] == 2
    relay.drop(STEP)


async def received(channel: str) -> list[dict[str, Any]]:
    """Everything queued for `channel` once the publisher's sender is done."""
    layer = get_channel_layer()
    for _ in range(100):  # let the sender finish (it never waits here unless gathering)
        await asyncio.sleep(0)
    out = []
    queue = layer.channels.get(channel)
    while queue is not None and not queue.empty():
        out.append(await layer.receive(channel))
    return out


async def all_sent(publisher: Publisher) -> None:
    """Until the publisher has sent all it emitted (a gathering delta leaves when it ends)."""
    await until_true(lambda: not publisher.sending(), what="the gathered tokens sent")


def deltas(messages: list[dict[str, Any]]) -> list[str]:
    return [
        json.loads(m["text"])["event"]["delta"] if m["type"] == "notebook.delta" else m
        for m in messages
    ]


async def watched_publisher(
    settings: Any, gather_floor: float = 0.0
) -> tuple[Publisher, str]:
    settings.CHANNEL_LAYERS = IN_MEMORY
    settings.AGENTUI_DELTA_GATHER_S = gather_floor  # (0.04 by default with REDIS_URL)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group_name(424242), channel)
    return Publisher(424242), channel


async def test_each_token_is_its_own_message_while_the_loop_keeps_up(
    settings: Any,
) -> None:
    publisher, channel = await watched_publisher(settings)
    words = [f"w{n} " for n in range(20)]
    for event in tokens(words):
        loop_lag().lag = 0.0
        await publisher(event)
        for _ in range(3):
            await asyncio.sleep(0)  # the sender runs before the next token
    got = await received(channel)
    assert deltas(got) == words  # 20 tokens, 20 messages
    offsets = [json.loads(m["text"])["offset"] for m in got]
    assert offsets == [len("".join(words[:n])) for n in range(len(words))]
    publisher.streams.drop(STEP)


@pytest.mark.parametrize(
    ("lag", "floor"),
    [
        (1.0, 0.0),  # far behind: gather for MAX_GATHER_S
        (0.0, MAX_GATHER_S),  # AGENTUI_DELTA_GATHER_S (Redis's default): no lag at all
    ],
    ids=["lagging-loop", "gather-floor"],
)
async def test_a_streams_tokens_gather_after_its_first(
    settings: Any, lag: float, floor: float
) -> None:
    publisher, channel = await watched_publisher(settings, gather_floor=floor)
    first, *rest = tokens([f"w{n} " for n in range(10)])
    loop_lag().lag = lag
    await publisher(first)  # the stream's first token leaves at once
    for _ in range(3):
        await asyncio.sleep(0)
    for event in rest:  # the next ones wait for company, which comes before they leave
        await publisher(event)
        for _ in range(3):
            await asyncio.sleep(0)
    await all_sent(publisher)
    assert deltas(await received(channel)) == [
        "w0 ",
        "".join(f"w{n} " for n in range(1, 10)),
    ]
    publisher.streams.drop(STEP)


async def test_something_else_to_send_ends_the_gathering(settings: Any) -> None:
    publisher, channel = await watched_publisher(settings)
    first, second, third = tokens(["a", "b", "c"])
    loop_lag().lag = 1.0
    await publisher(first)
    for _ in range(3):
        await asyncio.sleep(0)
    await publisher(second)
    for _ in range(3):
        await asyncio.sleep(0)  # gathering now
    reply = {"type": "notebook.reply", "message": {"type": "ack"}}
    publisher.reply(channel, reply)
    for _ in range(3):
        await asyncio.sleep(0)  # "b" left with the reply behind it, not waiting for "c"
    await publisher(third)
    await all_sent(publisher)
    assert deltas(await received(channel)) == ["a", "b", reply, "c"]
    publisher.streams.drop(STEP)


def test_each_event_loop_has_its_own_instance() -> None:
    from runs.realtime.pacing import per_loop

    current = per_loop(lambda loop: [loop])

    async def twice() -> tuple[list[Any], list[Any]]:
        return current(), current()

    first = asyncio.run(twice())
    second = asyncio.run(twice())
    assert first[0] is first[1] and second[0] is second[1]
    assert first[0] is not second[0]
