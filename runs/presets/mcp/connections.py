"""This process's sessions with MCP servers: started lazily, reused, closed cleanly.

A session lives in a task of its own (the SDK's transports are context managers whose task
group must be entered and left by one task), started by the first call that needs it and kept
for the next calls on the same event loop. A server that cannot start, or whose session broke,
fails that call with a message saying so; the next call tries again. `close_all` stops every
session of the running loop (and with it each stdio server's process).

A server whose process stops (it crashed, or someone killed it) ends its session: the end of
its output is noticed as it happens, and the next call starts the server again before it sends
anything, so that call goes through. A call under way when it stopped is not sent again (the
tool may have run): its error says the server stopped and is restarted on the next call. A
server that stops again before any call went through waits before each further restart
(`AGENTUI_MCP_RESTART_BACKOFF_S`, doubling up to `MAX_RESTART_WAIT_S`); calls meanwhile fail at
once, saying when to retry.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import tempfile
import warnings
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import anyio

from runs.presets.mcp.health import ServerState, health_of, note_failure, note_state
from runs.presets.mcp.spec import ServerSpec

if TYPE_CHECKING:  # the SDK (~0.5 s to import) loads when a server is first used
    from mcp import ClientSession

logger = logging.getLogger(__name__)

STDERR_TAIL_CHARS = 600
CLOSE_TIMEOUT_S = 10.0
MAX_RESTART_WAIT_S = 60.0


class McpError(Exception):
    """A server could not be reached or did not answer; the message is for the person."""


class Connection:
    """One session with one server, held open by its own task until `close`."""

    def __init__(self, spec: ServerSpec, tracked: bool = True) -> None:
        self.spec = spec
        # a pooled session's state is the server's (runs.presets.mcp.health); a listing's own
        # short session is not
        self.tracked = tracked
        self.roots = spec.roots  # what roots/list answers now
        self._roots_saved_at = spec.saved_at
        self._relisting: set[asyncio.Task[None]] = set()
        self.session: ClientSession | None = None
        self.session_started = False
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()  # `close` was called
        self._ended = (
            asyncio.Event()
        )  # the session's input ended (the server's output did)
        self._done_holding = asyncio.Event()  # either of the two
        self._failure: BaseException | None = None
        self._stderr: IO[str] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def broken(self) -> bool:
        return self._task is not None and (self._task.done() or self._ended.is_set())

    @property
    def stopped(self) -> bool:
        """Whether the server ended a session that had started (not closed from here)."""
        return self.session_started and self.broken and not self._stop.is_set()

    async def open(self, timeout: float) -> ClientSession:
        """The session, starting the server on first use; McpError when it does not start."""
        if self._task is None:
            self._note(ServerState.STARTING)
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
            message = (
                f"the MCP server {self.spec.name!r} did not start within {timeout:g} s "
                "(AGENTUI_MCP_START_TIMEOUT_S)"
            )
            self._failed(message)
            raise McpError(message) from None
        if self.session is None:
            message = self._why_not_started()
            self._failed(message)
            raise McpError(message)
        return self.session

    def _note(self, state: ServerState) -> None:
        if self.tracked:
            note_state(self.spec.pk, state)

    def _failed(self, message: str) -> None:
        if self.tracked:
            note_failure(self.spec.pk, message)

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
        from mcp import ClientSession

        # declares the elicitation capability: a server may ask the person during a call
        from runs.presets.mcp.eliciting import on_elicitation

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                watched = await stack.enter_async_context(self._watched(read))
                session = await stack.enter_async_context(
                    ClientSession(
                        watched,
                        write,
                        elicitation_callback=on_elicitation,
                        # declares the roots capability: roots/list answers the admin's roots
                        list_roots_callback=self._list_roots,
                        logging_callback=self._on_log,
                        message_handler=self._on_message,
                        log_level=self.spec.log_level,  # type: ignore[arg-type]
                    )
                )
                await session.initialize()
                await self._set_log_level(session)
                self.session = session
                self.session_started = True
                self._note(ServerState.CONNECTED)
                self._ready.set()
                await self._done_holding.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to the call that waits
            self._failure = _first_cause(exc)
            logger.info("MCP server %s: %s", self.spec.name, self._failure)
        finally:
            self.session = None
            self._ready.set()

    async def _list_roots(self, context: Any) -> Any:
        from mcp.types import ListRootsResult, Root

        return ListRootsResult(roots=[Root(uri=uri) for uri in self.roots])  # type: ignore[arg-type]

    async def set_roots(self, spec: ServerSpec) -> None:
        """The admin changed the server's roots: answer with `spec`'s, and tell the session
        (a spec saved before the roots answered now, a runner not yet rebuilt, changes nothing)."""
        if spec.roots == self.roots or spec.saved_at < self._roots_saved_at:
            return
        self.roots = spec.roots
        self._roots_saved_at = spec.saved_at
        session = self.session
        if session is None or self.broken:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated from the 2026 protocol on
                await session.send_roots_list_changed()
        except Exception as exc:  # noqa: BLE001 - it asks roots/list again on its own or not
            logger.info(
                "MCP server %s: could not send roots/list_changed: %s",
                self.spec.name,
                exc,
            )

    async def _on_message(self, message: Any) -> None:
        """A server's notification: a changed tool list is listed again, on a task of its own
        (the listing is a request on this same session)."""
        from mcp.types import ToolListChangedNotification

        session = self.session
        if not self.tracked or session is None:
            return
        if isinstance(message, ToolListChangedNotification):
            from runs.presets.mcp.listing import relist

            task = asyncio.get_running_loop().create_task(
                relist(self.spec, session), name=f"mcp-relist:{self.spec.name}"
            )
            self._relisting.add(task)
            task.add_done_callback(self._relisting.discard)

    async def _on_log(self, params: Any) -> None:
        from runs.presets.mcp.progress import on_log

        await on_log(self.spec.name, self.session, self.spec.log_level, params)

    async def _set_log_level(self, session: ClientSession) -> None:
        """Ask a server that logs to send only the admin's level and above (`logging/setLevel`;
        newer protocol versions carry the level on each request, `log_level` above)."""
        capabilities = session.server_capabilities
        if capabilities is None or capabilities.logging is None:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated from the 2026 protocol on
                await session.set_logging_level(self.spec.log_level)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - its messages are filtered here anyway
            logger.info(
                "MCP server %s refused logging/setLevel: %s", self.spec.name, exc
            )

    @asynccontextmanager
    async def _watched(self, read: Any) -> AsyncIterator[Any]:
        """`read` passed on as it comes, noting when it ends: the server's output closed (a
        stdio server's process stopped), so this session is over and the next call restarts."""
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def forward() -> None:
            try:
                async for message in read:
                    await send.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # this side closed the session
            finally:
                # noted before the session hears of the end, so a call it fails knows why
                if not self._stop.is_set():
                    logger.warning("MCP server %s: its session ended", self.spec.name)
                    if self.session_started:
                        self._failed(
                            "its session ended: the server stopped (it is restarted on "
                            "the next call)"
                        )
                self._ended.set()
                self._done_holding.set()
                send.close()

        async with anyio.create_task_group() as group:
            group.start_soon(forward)
            try:
                yield receive
            finally:
                group.cancel_scope.cancel()

    def _transport(self) -> Any:
        from mcp import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

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
        self._done_holding.set()
        for relisting in list(self._relisting):
            relisting.cancel()
        if self.tracked and health_of(self.spec.pk).state != ServerState.FAILING:
            note_state(self.spec.pk, ServerState.STOPPED)
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


@dataclass
class _Restarts:
    """A server's restarts since a call last went through, and when the last one was."""

    count: int = 0
    at: float = 0.0

    def wait_left(self, now: float, backoff: float) -> float:
        if self.count == 0:
            return 0.0
        wait = min(backoff * 2.0 ** (self.count - 1), MAX_RESTART_WAIT_S)
        return max(0.0, self.at + wait - now)


# per event loop, per server spec: a loop's sessions cannot be used from another loop
_connections: dict[tuple[int, ServerSpec], Connection] = {}
_restarts: dict[tuple[int, ServerSpec], _Restarts] = {}


def _may_restart(key: tuple[int, ServerSpec], backoff: float) -> None:
    """Count a restart of `key`'s stopped server, or McpError when it must wait first."""
    restarts = _restarts.setdefault(key, _Restarts())
    now = asyncio.get_running_loop().time()
    wait = restarts.wait_left(now, backoff)
    name = key[1].name
    if wait > 0:
        raise McpError(
            f"the MCP server {name!r} stopped again after being restarted; it is restarted "
            f"on a call in {math.ceil(wait)} s: retry then (AGENTUI_MCP_RESTART_BACKOFF_S)"
        )
    restarts.count += 1
    restarts.at = now
    logger.warning(
        "MCP server %s had stopped; restarting it (restart %d)", name, restarts.count
    )


async def session_for(
    spec: ServerSpec, start_timeout: float, restart_backoff: float = 0.0
) -> ClientSession:
    """A started session with `spec`'s server on the running loop (McpError if it won't start,
    or if it stopped and may not be restarted yet)."""
    loop_id = id(asyncio.get_running_loop())
    key = (loop_id, spec)
    connection = _connections.get(key)
    if connection is not None and not connection.broken:
        await connection.set_roots(spec)
    if connection is not None and connection.stopped:
        _may_restart(key, restart_backoff)
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


def stopped(spec: ServerSpec) -> bool:
    """Whether `spec`'s server on the running loop ended its session (its process stopped)."""
    connection = _connections.get((id(asyncio.get_running_loop()), spec))
    return connection is not None and connection.stopped


def went_through(spec: ServerSpec) -> None:
    """A call of `spec`'s server was answered: its next stop restarts it without waiting."""
    _restarts.pop((id(asyncio.get_running_loop()), spec), None)


async def close_all() -> None:
    """Close every session of the running loop, and stop their servers."""
    loop_id = id(asyncio.get_running_loop())
    for key in [key for key in _restarts if key[0] == loop_id]:
        del _restarts[key]
    mine = [key for key in _connections if key[0] == loop_id]
    for key in mine:
        connection = _connections.pop(key)
        await connection.close()


def open_count() -> int:
    """How many sessions this process holds (tests, metrics)."""
    return len(_connections)
