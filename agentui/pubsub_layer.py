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
"""

from __future__ import annotations

import asyncio
import logging
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

    async def publish(self, channel: str, message: bytes) -> None:
        self._ensure_redis()  # no await before the command: nothing to lock
        await self._redis.publish(channel, message)

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
        if name in layer.channels:
            layer.put(name, message["data"])
        else:
            for channel in layer.groups.get(name, ()):
                layer.put(channel, message["data"])


class _LoopLayer(RedisPubSubLoopLayer):  # type: ignore[misc]
    """One event loop's subscriptions and sockets' queues."""

    def __init__(self, *args: Any, capacity: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.capacity = capacity
        self.drops = DropCounter(capacity)
        self._shards = [_Shard(shard.host, self) for shard in self._shards]
        self.down = False  # Redis went away and has not answered since

    @property
    def dropped(self) -> int:
        """Messages a full socket queue of this loop missed, since the start."""
        return self.drops.dropped

    async def _subscribe_to_channel(self, channel: str) -> None:
        self.channels[channel] = asyncio.Queue(maxsize=self.capacity)
        await self._get_shard(channel).subscribe(channel)

    async def group_discard(self, group: str, channel: str) -> None:
        """Leave `group`; a channel left in no group that nobody reads is forgotten too.

        channels-redis forgets a channel only when a receive on it is cancelled; a reader that
        leaves between two receives (an AG-UI or REST event stream closed while it writes) kept
        its queue and its Redis subscription for the life of the process.
        """
        await super().group_discard(group, channel)
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
