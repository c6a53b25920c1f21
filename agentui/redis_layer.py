"""channels-redis, receiving what waits for a process in one round trip instead of four a message.

All the sockets of one daphne process share one Redis key (their channels are "specific"
channels of the process). channels-redis takes messages off it one at a time, each with four
commands in turn: a script putting back what an interrupted receive left in the backup key, a
blocking pop, an add to the backup key, and (in a task, under a lock the next receive waits
for) a pop from the backup key. With every streamed token a message per socket, that was the
ceiling of the two-process setup: at 50 streaming notebooks the processes fell seconds behind
and channels-redis dropped deltas over the key's capacity (bench/bench_load.py, docs/benchmarks.md).

`RedisLayer` takes everything waiting on the key (up to `RECEIVE_BATCH` messages) with one
script that also keeps them in the backup key, puts them all in their sockets' buffers at once
(channels-redis handed out one message per pass of its receive lock, a few passes of the event
loop each), and empties the backup key before the next batch. A receive interrupted before
the script's answer arrived leaves them in the backup key, and the next script puts them back,
as channels-redis does for its one message. Only when nothing waits does it block the usual way.

Sending to a group cost channels-redis four round trips in turn (drop expired members, read the
members, drop expired messages, a script adding the message under each key's capacity, its text
sent every time). `RedisLayer.group_send` does the same in two: the members are read in one
pipeline, and one cached script (EVALSHA) drops the expired messages and adds the new one. The
messages, keys, capacities and expiries are channels-redis's own, built by its own code.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from channels_redis.core import RedisChannelLayer
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

logger = logging.getLogger(__name__)

# Put back what an interrupted receive left in the backup key, then move up to ARGV[1] waiting
# messages from the key to the backup key and return them.
TAKE_WAITING = """
local backed_up = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #backed_up, 2 do
    redis.call('ZADD', KEYS[1], backed_up[i + 1], backed_up[i])
end
redis.call('DEL', KEYS[2])
local taken = redis.call('ZPOPMIN', KEYS[1], ARGV[1])
for i = 1, #taken, 2 do
    redis.call('ZADD', KEYS[2], taken[i + 1], taken[i])
end
return taken
"""

# For each key: drop its expired messages, then add ARGV[i] unless the key holds its capacity
# (ARGV[#KEYS + i]) already. The last three ARGV: now, expiry (s), drop scores up to this.
GROUP_SEND = """
local over_capacity = 0
local now = ARGV[#ARGV - 2]
local expiry = ARGV[#ARGV - 1]
local expired = ARGV[#ARGV]
for i = 1, #KEYS do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, expired)
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[i + #KEYS]) then
        redis.call('ZADD', KEYS[i], now, ARGV[i])
        redis.call('EXPIRE', KEYS[i], expiry)
    else
        over_capacity = over_capacity + 1
    end
end
return over_capacity
"""


async def run_script(
    connection: Redis, source: str, keys: list[Any], args: list[Any]
) -> Any:
    """EVALSHA `source`; its text goes to Redis only when Redis does not have it yet."""
    sha = _SHAS.get(source)
    if sha is None:
        sha = _SHAS[source] = hashlib.sha1(source.encode()).hexdigest()
    try:
        return await connection.evalsha(sha, len(keys), *keys, *args)
    except NoScriptError:
        return await connection.eval(source, len(keys), *keys, *args)


_SHAS: dict[str, str] = {}


class RedisLayer(RedisChannelLayer):
    RECEIVE_BATCH = 200

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # per process channel: whether the last batch taken was handed out (its backup can go)
        self._handed_out: dict[str, bool] = {}

    async def receive_single(self, channel: str) -> tuple[Any, dict[str, Any]]:
        """The next message of `channel`; for a process channel, the others waiting are put in
        their sockets' buffers at once (channels-redis handed out one per receive lock)."""
        if "!" not in channel:  # a channel any process may read: channels-redis's way
            return await super().receive_single(channel)
        taken = await self._take_waiting(channel)
        if not taken:
            # nothing waits: block for the next one (that way keeps its own backup)
            return await super().receive_single(channel)
        *first, last = [self._unpacked(content, channel) for content in taken]
        for to, message in first:
            for socket in to if isinstance(to, list) else [to]:
                self.receive_buffer[socket].put_nowait(message)
        self._handed_out[channel] = True
        return last

    def _unpacked(self, content: bytes, channel: str) -> tuple[Any, dict[str, Any]]:
        message = self.deserialize(content)
        if "__asgi_channel__" in message:  # a group message names its sockets here
            channel = message.pop("__asgi_channel__")
        return channel, message

    async def _take_waiting(self, channel: str) -> list[bytes]:
        key = self.prefix + channel
        backup = self._backup_channel_name(key)
        connection = self.connection(self.consistent_hash(channel))
        # one receive at a time per key, so channels-redis's backup cleaner is done first
        await self.receive_clean_locks.acquire(key)
        try:
            if self._handed_out.get(channel):
                # the last batch was handed out whole: its backup must not come back
                await connection.delete(backup)
                self._handed_out[channel] = False
            reply = await run_script(
                connection, TAKE_WAITING, [key, backup], [self.RECEIVE_BATCH]
            )
        finally:
            self.receive_clean_locks.release(key)
        return list(reply[0::2])

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert self.require_valid_group_name(group), "Group name not valid"
        key = self._group_key(group)
        connection = self.connection(self.consistent_hash(group))
        pipe = connection.pipeline(transaction=False)
        pipe.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)
        pipe.zrange(key, 0, -1)
        _, members = await pipe.execute()
        channels = [m.decode("utf8") for m in members]
        by_connection, messages, capacities = self._map_channel_keys_to_connection(
            channels, message
        )
        for index, keys in by_connection.items():
            now = time.time()
            args = [messages[k] for k in keys] + [capacities[k] for k in keys]
            over = await run_script(
                self.connection(index),
                GROUP_SEND,
                keys,
                [*args, now, self.expiry, int(now) - int(self.expiry)],
            )
            if over > 0:
                logger.info(
                    "%s of %s channels over capacity in group %s",
                    over,
                    len(channels),
                    group,
                )
