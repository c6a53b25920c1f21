"""The channel layer for REDIS_URL setups: channels-redis's pub/sub layer, bounded and outage-aware.

channels-redis's core layer (`RedisChannelLayer`) keeps a queue per process in Redis: every
message to a group is one script per member socket, and a process takes its messages one by one
(a script, a blocking pop, a backup write and a cleaner's pop each). With every streamed token a
group message, two daphne processes spent ~1 ms of CPU per token and fell seconds behind at 50
streaming notebooks (docs/benchmarks.md). Its pub/sub layer (`RedisPubSubChannelLayer`)
publishes a group message once; each process subscribed to the group receives it once, over one
connection, and puts it in its own sockets' queues. This subclass keeps that and changes three
things:

- A socket's queue holds at most `capacity` messages (channels-redis's is unbounded): a message
  for a full queue is dropped, counted and logged (agentui.layer_drops), and the socket heals
  from the database (runs.realtime.catch_up) as with the other layers.
- Publishing does not wait for the process's other publishes (channels-redis takes one lock per
  shard around each PUBLISH, so every notebook's messages of a process queued behind one
  another's round trips). A notebook's messages still reach Redis in order: its publisher sends
  one at a time (runs.realtime.publisher).
- Redis going away is reported to the sockets: each receiver of the process gets a
  `ConnectionError` (channels-redis logs the error and carries on, the sockets would not know
  that messages were lost), so a socket says `live` false and reads the database until its
  `group_add` works again (runs.web.consumer); and `group_add` always asks Redis, so it fails
  while Redis is down. redis-py subscribes again by itself when the connection comes back, and
  after a restart quick enough for redis-py to reconnect within one read, nothing fails: that
  reconnection is reported the same way (what was published meanwhile never came).
- Redis carries only what other processes need. A notebook's socket is usually served by the
  process that runs its turn; while no other process (or event loop) subscribes to a group, the
  group's messages go straight into this loop's sockets' queues, without a round trip through
  Redis (a PUBLISH and reading it back cost ~0.15 ms of CPU per streamed token, half of what a
  token costs in all). A loop learns that it is alone from Redis itself: a PUBLISH that reached
  one subscriber, and that subscriber was this loop (its own copy came back; everything it
  published before is then in its sockets' queues, so the switch keeps the order). A loop that
  subscribes to a group announces it on the group (`JOINED`), and a loop that hears it
  publishes again; being alone also lasts at most `ALONE_FOR_S`, then one PUBLISH asks again,
  and a Redis outage or reconnection forgets it. What a newcomer can miss in the moment
  between its subscription and the announcement reaching the sender is what the sockets
  already heal: a stored event by its seq (a gap fill or the catch-up sweep), a token by the
  next delta's whole `response`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from typing import Any

from channels_redis.pubsub import (
    RedisPubSubChannelLayer,
    RedisPubSubLoopLayer,
    RedisSingleShardConnection,
)
from channels_redis.utils import _wrap_close, create_pool
from redis import asyncio as aioredis
from redis.asyncio.client import PubSub

from agentui.layer_drops import DropCounter

logger = logging.getLogger(__name__)

RETRY_AFTER_S = 1.0
# how long a loop that heard only its own copy of a group message keeps the group's messages to itself
ALONE_FOR_S = 1.0
# published on a group by a loop that subscribes to it, followed by the loop's own id (never a
# serialized message: msgpack maps start with 0x80-0x8f or 0xde-0xdf)
JOINED = b"agentui:joined:"


class LayerDown(ConnectionError):
    """Redis went away: messages may have been lost meanwhile."""


class _Subscriptions(PubSub):  # type: ignore[misc]
    """redis-py's PubSub, telling the layer when its connection was made again: redis-py then
    subscribes again by itself, but what was published meanwhile never came."""

    def __init__(self, *args: Any, reconnected: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reconnected = reconnected
        self._connected_before = False

    async def on_connect(self, connection: Any) -> None:
        if self._connected_before:
            self._reconnected()
        self._connected_before = True
        await super().on_connect(connection)


class _Shard(RedisSingleShardConnection):  # type: ignore[misc]
    channel_layer: _LoopLayer

    def _ensure_redis(self) -> None:
        if self._redis is None:
            self._redis = aioredis.Redis(connection_pool=create_pool(self.host))
            self._pubsub = _Subscriptions(
                self._redis.connection_pool,
                reconnected=lambda: self.channel_layer.went_away(
                    ConnectionError("reconnected to Redis")
                ),
            )

    async def publish(self, channel: str, message: bytes) -> int:
        """PUBLISH; how many subscribers received it."""
        self._ensure_redis()  # no await before the command: nothing to lock
        return int(await self._redis.publish(channel, message))

    async def subscribe(self, channel: str) -> None:
        """Subscribe, asking Redis even when subscribed already (so it fails while Redis is down)."""
        async with self._lock:
            self._ensure_redis()
            self._ensure_receiver()
            await self._pubsub.subscribe(channel)
            self._subscribed_to.add(channel)

    async def _do_receiving(self) -> None:
        while True:
            try:
                if self._pubsub is not None and self._pubsub.subscribed:
                    message = await self._pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=0.1
                    )
                    self.channel_layer.back()
                    self._receive_message(message)
                else:
                    await asyncio.sleep(0.1)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - Redis went away; redis-py reconnects on the next read
                self.channel_layer.went_away(exc)
                await asyncio.sleep(RETRY_AFTER_S)

    def _receive_message(self, message: dict[str, Any] | None) -> None:
        if message is None:
            return
        name = message["channel"]
        if isinstance(name, bytes):
            name = name.decode()
        layer = self.channel_layer
        data = message["data"]
        if name in layer.channels:
            layer.put(name, data)
        elif data.startswith(JOINED):
            if data != layer.joined:  # another loop subscribed
                layer.not_alone(name)
        else:
            for channel in layer.groups.get(name, ()):
                layer.put(channel, data)
            layer.own_copy_back(name, data)


class _LoopLayer(RedisPubSubLoopLayer):  # type: ignore[misc]
    """One event loop's subscriptions and sockets' queues."""

    def __init__(self, *args: Any, capacity: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.capacity = capacity
        self.drops = DropCounter(capacity)
        self._shards = [_Shard(shard.host, self) for shard in self._shards]
        self.down = False  # Redis went away and has not answered since
        # group channel -> until when this loop is its only subscriber (group_send keeps it local)
        self._alone: dict[str, float] = {}
        # group channel -> the last message published while it reached only one subscriber
        self._awaiting_own_copy: dict[str, bytes] = {}
        # group channel -> PUBLISHes under way
        self._publishing: Counter[str] = Counter()
        self.joined = JOINED + uuid.uuid4().hex.encode()

    @property
    def dropped(self) -> int:
        """Messages a full socket queue of this loop missed, since the start."""
        return self.drops.dropped

    async def _subscribe_to_channel(self, channel: str) -> None:
        self.channels[channel] = asyncio.Queue(maxsize=self.capacity)
        await self._get_shard(channel).subscribe(channel)

    async def group_add(self, group: str, channel: str) -> None:
        """Join `group`; a loop's first socket in the group announces the subscription to the
        group's other subscribers, which then stop keeping its messages to themselves."""
        group_channel = self._get_group_channel_name(group)
        first = group_channel not in self.groups
        if first:  # what this loop knew of the others dates from before it subscribed
            self.not_alone(group_channel)
        await super().group_add(group, channel)
        if first:
            await self._get_shard(group_channel).publish(group_channel, self.joined)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Straight into this loop's sockets' queues while it is the group's only subscriber,
        else one PUBLISH (whose receiver count tells whether it was)."""
        group_channel = self._get_group_channel_name(group)
        data = self.channel_layer.serialize(message)
        members = self.groups.get(group_channel)
        if members and self._alone.get(group_channel, 0.0) > time.monotonic():
            for channel in members:
                self.put(channel, data)
            return
        self._alone.pop(group_channel, None)
        if members:
            self._awaiting_own_copy[group_channel] = data
        self._publishing[group_channel] += 1
        try:
            receivers = await self._get_shard(group_channel).publish(
                group_channel, data
            )
        finally:
            self._publishing[group_channel] -= 1
            if not self._publishing[group_channel]:
                del self._publishing[group_channel]
        if receivers != 1 or not self.groups.get(group_channel) or self.down:
            self.not_alone(group_channel)  # another subscriber (or not even this loop)

    def own_copy_back(self, group_channel: str, data: bytes) -> None:
        """This loop's copy of a message came back: if it was the last one published, had one
        receiver and no other PUBLISH is under way (one of them could still be on its way
        here), every earlier copy is in the queues and the loop is the group's only subscriber."""
        if (
            self._awaiting_own_copy.get(group_channel) == data
            and group_channel not in self._publishing
        ):
            del self._awaiting_own_copy[group_channel]
            self._alone[group_channel] = time.monotonic() + ALONE_FOR_S

    def not_alone(self, group_channel: str) -> None:
        self._alone.pop(group_channel, None)
        self._awaiting_own_copy.pop(group_channel, None)

    async def group_discard(self, group: str, channel: str) -> None:
        """Leave `group`; a channel left in no group that nobody reads is forgotten too.

        channels-redis forgets a channel only when a receive on it is cancelled; a reader that
        leaves between two receives (an AG-UI or REST event stream closed while it writes) kept
        its queue and its Redis subscription for the life of the process.
        """
        await super().group_discard(group, channel)
        group_channel = self._get_group_channel_name(group)
        if group_channel not in self.groups:  # its last socket here left
            self.not_alone(group_channel)  # (and nothing kept per group outlives it)
        queue = self.channels.get(channel)
        if queue is None or getattr(queue, "_getters", None):
            return  # gone already, or a receive waits (its cancellation forgets the channel)
        if any(channel in members for members in self.groups.values()):
            return
        del self.channels[channel]
        await self._get_shard(channel).unsubscribe(channel)

    def put(self, channel: str, data: Any) -> None:
        queue = self.channels.get(channel)
        if queue is None:
            return  # the socket left meanwhile
        try:
            queue.put_nowait(data)
        except asyncio.QueueFull:
            self.drops.dropped_one()

    def went_away(self, exc: BaseException) -> None:
        """Every socket of this loop learns that Redis went away (its next receive raises), once."""
        self._alone.clear()  # who else subscribes must be asked again
        self._awaiting_own_copy.clear()
        if self.down:
            return
        self.down = True
        logger.warning(
            "channel layer: Redis went away (%r); sockets read the database", exc
        )
        for queue in self.channels.values():
            if (
                queue.full()
            ):  # the oldest message makes room for the news, and is counted
                queue.get_nowait()
                self.drops.dropped_one()
            queue.put_nowait(LayerDown(f"Redis went away: {exc!r}"))

    def back(self) -> None:
        if self.down:
            self.down = False
            logger.warning("channel layer: Redis answers again")


class PubSubLayer(RedisPubSubChannelLayer):  # type: ignore[misc]
    """`RedisPubSubChannelLayer` with bounded, counted queues and Redis outages reported."""

    def __init__(self, *args: Any, capacity: int = 1000, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.capacity = capacity

    def _get_layer(self) -> _LoopLayer:
        loop = asyncio.get_running_loop()
        layer = self._layers.get(loop)
        if layer is None:
            layer = self._layers[loop] = _LoopLayer(
                *self._args, **self._kwargs, capacity=self.capacity, channel_layer=self
            )
            _wrap_close(self, loop)
        return layer

    def deserialize(self, message: Any) -> dict[str, Any]:
        if isinstance(message, LayerDown):
            raise message
        return super().deserialize(message)  # type: ignore[no-any-return]

    # spelled out (channels-redis reaches them through __getattr__), so subclasses can extend them
    async def new_channel(self, prefix: str = "specific.") -> str:
        return await self._get_layer().new_channel(prefix)  # type: ignore[no-any-return]

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self._get_layer().send(channel, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        return await self._get_layer().receive(channel)  # type: ignore[no-any-return]

    async def group_add(self, group: str, channel: str) -> None:
        await self._get_layer().group_add(group, channel)

    async def group_discard(self, group: str, channel: str) -> None:
        await self._get_layer().group_discard(group, channel)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self._get_layer().group_send(group, message)

    async def flush(self) -> None:
        await self._get_layer().flush()
