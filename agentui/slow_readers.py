"""A websocket client that does not read what it is sent cannot make the server hold it.

Under daphne a message an application sends over a websocket is written to the connection at
once: Twisted keeps whatever the client has not read in memory, without limit, and the sender
is never told. A client that sends `resume` from seq 0 again and again without reading had the
whole notebook queued once per message (18 MB of replay for a 40-byte message: 30 of them
raised daphne's memory by ~500 MB within 4 s).

Here the sender waits instead: once the connection holds more than Twisted's write buffer (64
KiB) that the client has not read, the application's `send` returns only when the client has
read it all, and meanwhile the server stops reading that client's messages too (they would
otherwise pile up unread, in memory, behind the waiting send). The socket's own consumer is
what waits; every other socket, the runs and the channel layer go on (a group message the
waiting consumer cannot take in is dropped by the layer and filled from the database later,
as for any slow socket). A client that reads nothing for `AGENTUI_WS_UNREAD_TIMEOUT_S` is
disconnected (no close frame: it would not read one).

`install_in_daphne()` puts it in place (agentui/asgi.py calls it); elsewhere nothing changes.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from runs.conf import conf

logger = logging.getLogger(__name__)


class _Unread:
    """The connection's streaming producer: Twisted pauses it when the client's unread output
    is over its write buffer and resumes it when the client has read all of it."""

    def __init__(self) -> None:
        self.paused = False
        self._drained: asyncio.Future[None] | None = None

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's IPushProducer
        self.paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self.paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def stopProducing(self) -> None:  # noqa: N802 - the connection is gone
        self.resumeProducing()

    async def drained(self, timeout: float) -> bool:
        """True once the client has read everything (at once if it has), False after `timeout`."""
        if not self.paused:
            return True
        self._drained = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._drained), timeout)
        except TimeoutError:
            return False
        return True


def _watch(protocol: Any) -> _Unread | None:
    """The connection's `_Unread`, registered with its transport the first time."""
    watch = protocol.__dict__.get("_agentui_unread")
    if watch is None:
        transport = getattr(protocol, "transport", None)
        if transport is None:
            return None
        watch = _Unread()
        try:
            transport.registerProducer(watch, True)
        except RuntimeError:
            # the HTTP channel the socket was upgraded from; it has nothing to send anymore
            transport.unregisterProducer()
            transport.registerProducer(watch, True)
        protocol._agentui_unread = watch
    return watch


async def wait_until_read(protocol: Any) -> None:
    """After a websocket send: wait while the client has too much unread, reading nothing from
    it meanwhile; disconnect it if it reads nothing for the setting's time."""
    watch = _watch(protocol)
    if watch is None or not watch.paused:
        return
    transport = protocol.transport
    transport.pauseProducing()  # stop reading the client's messages too
    timeout = conf().ws_unread_timeout_s
    if await watch.drained(timeout):
        if protocol.transport is not None:
            transport.resumeProducing()
        return
    logger.warning(
        "websocket %s read nothing of its output for %.0f s: disconnected",
        getattr(protocol, "client_addr", None),
        timeout,
    )
    transport.abortConnection()


def install_in_daphne() -> None:
    """Under daphne, make every websocket send wait for a client that does not read."""
    server = sys.modules.get("daphne.server")
    ws = sys.modules.get("daphne.ws_protocol")
    if server is None or ws is None or getattr(server.Server, "_agentui_waits", False):
        return
    original = server.Server.handle_reply
    websocket_protocol = ws.WebSocketProtocol

    async def handle_reply(self: Any, protocol: Any, message: dict[str, Any]) -> None:
        await original(self, protocol, message)
        if message.get("type") == "websocket.send" and isinstance(
            protocol, websocket_protocol
        ):
            await wait_until_read(protocol)

    server.Server.handle_reply = handle_reply
    server.Server._agentui_waits = True
