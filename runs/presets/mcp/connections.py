"""This process's sessions with MCP servers: started lazily, reused, closed cleanly.

A session lives in a task of its own (the SDK's transports are context managers whose task
group must be entered and left by one task), started by the first call that needs it and kept
for the next calls on the same event loop. A server that cannot start, or whose session broke,
fails that call with a message saying so; the next call tries again. `close_all` stops every
session of the running loop (and with it each stdio server's process).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import tempfile
from contextlib import AsyncExitStack
from typing import IO, Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from runs.presets.mcp.spec import ServerSpec

logger = logging.getLogger(__name__)

STDERR_TAIL_CHARS = 600
CLOSE_TIMEOUT_S = 10.0


class McpError(Exception):
    """A server could not be reached or did not answer; the message is for the person."""


class Connection:
    """One session with one server, held open by its own task until `close`."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._failure: BaseException | None = None
        self._stderr: IO[str] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def broken(self) -> bool:
        return self._task is not None and self._task.done()

    async def open(self, timeout: float) -> ClientSession:
        """The session, starting the server on first use; McpError when it does not start."""
        if self._task is None:
            # a context of its own: the session outlives the request that happened to start it
            self._task = asyncio.get_running_loop().create_task(
                self._hold(),
                name=f"mcp:{self.spec.name}",
                context=contextvars.Context(),
            )
        try:
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            await self.close()
            raise McpError(
                f"the MCP server {self.spec.name!r} did not start within {timeout:g} s "
                "(AGENTUI_MCP_START_TIMEOUT_S)"
            ) from None
        if self.session is None:
            raise McpError(self._why_not_started())
        return self.session

    def _why_not_started(self) -> str:
        failure = self._failure
        reason = _describe(failure) if failure is not None else "it stopped"
        tail = self._stderr_tail()
        said = f"; it wrote: {tail}" if tail else ""
        return f"the MCP server {self.spec.name!r} did not start: {reason}{said}"

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            text = self._stderr.read()
        except (OSError, ValueError):
            return ""
        return " ".join(text.split())[-STDERR_TAIL_CHARS:]

    async def _hold(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.session = session
                self._ready.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to the call that waits
            self._failure = _first_cause(exc)
            logger.info("MCP server %s: %s", self.spec.name, self._failure)
        finally:
            self.session = None
            self._ready.set()

    def _transport(self) -> Any:
        spec = self.spec
        if spec.is_http:
            client = create_mcp_http_client(headers=dict(spec.headers) or None)
            return streamable_http_client(spec.url, http_client=client)
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        params = StdioServerParameters(
            command=spec.command, args=list(spec.args), env=dict(spec.env) or None
        )
        return stdio_client(params, errlog=self._stderr)

    async def close(self) -> None:
        """Stop the session and its server; waits for the server process to be gone."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_S)
            except TimeoutError:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _first_cause(exc: BaseException) -> BaseException:
    """The error inside an exception group (the SDK's task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"no program {exc.filename or ''!s} to run".replace("  ", " ")
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# per event loop, per server spec: a loop's sessions cannot be used from another loop
_connections: dict[tuple[int, ServerSpec], Connection] = {}


async def session_for(spec: ServerSpec, start_timeout: float) -> ClientSession:
    """A started session with `spec`'s server on the running loop (McpError if it won't start)."""
    loop_id = id(asyncio.get_running_loop())
    key = (loop_id, spec)
    connection = _connections.get(key)
    if connection is None or connection.broken:
        # stored before any await: calls made meanwhile (a plan's parallel calls) share it
        stale = [connection] if connection is not None else []
        connection = _connections[key] = Connection(spec)
        # an edited server's old session goes: one session per server and loop
        for other_key in list(_connections):
            other_loop, other = other_key
            if other_loop == loop_id and other.pk == spec.pk and other != spec:
                stale.append(_connections.pop(other_key))
        for old in stale:
            await old.close()
    try:
        return await connection.open(start_timeout)
    except McpError:
        if _connections.get(key) is connection:
            _connections.pop(key, None)
        await connection.close()
        raise


async def drop(spec: ServerSpec) -> None:
    """Close `spec`'s session on the running loop (it broke); the next call starts it again."""
    connection = _connections.pop((id(asyncio.get_running_loop()), spec), None)
    if connection is not None:
        await connection.close()


async def close_all() -> None:
    """Close every session of the running loop, and stop their servers."""
    loop_id = id(asyncio.get_running_loop())
    mine = [key for key in _connections if key[0] == loop_id]
    for key in mine:
        connection = _connections.pop(key)
        await connection.close()


def open_count() -> int:
    """How many sessions this process holds (tests, metrics)."""
    return len(_connections)
