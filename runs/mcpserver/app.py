"""The ASGI application at `/mcp/`: host and token checks, then the SDK's streamable HTTP.

The session manager runs stateless: every POST carries one exchange and its answer (streamed
as server-sent events while a tool call waits for a person), so any daphne process may serve
any call and nothing is kept between them. The manager needs its `run()` context open before it
serves; daphne has no lifespan events, so the first request opens it in a task of its own that
lives as long as the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from runs.conf import conf
from runs.service import Asker, AuthFailed, live_token

logger = logging.getLogger(__name__)

PATHS = ("/mcp", "/mcp/")
ASKER_KEY = "agentui.asker"  # the ASGI scope's key for who calls (runs.mcpserver.tools)

Scope = dict[str, Any]


def is_mcp_path(path: str) -> bool:
    return path in PATHS


async def _refuse(send: Any, status: int, detail: str, *, auth: bool = False) -> None:
    """A JSON-RPC error without an id, as the SDK answers refused requests."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": detail}}
    ).encode()
    headers = [(b"content-type", b"application/json")]
    if auth:
        headers.append((b"www-authenticate", b'Bearer realm="agentui"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _token_of(scope: Scope) -> str:
    header = _header(scope, b"authorization")
    if header is None:
        raise AuthFailed(
            401,
            "Not logged in: send 'Authorization: Bearer <API token>' "
            "(create one on /settings/tokens/).",
        )
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthFailed(401, "Authorization header must be 'Bearer <API token>'.")
    return token.strip()


def _asker(token: str, client: str) -> Asker:
    row = live_token(token)
    return Asker(user=row.user, token=row, client_name=client)


class McpApp:
    """`/mcp/`: the SDK's streamable HTTP under agentui's token auth."""

    def __init__(self) -> None:
        self._manager: Any = None
        self._ready: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None

    async def _started(self) -> Any:
        if self._ready is None:
            # imported with the first call: a server nobody asks over MCP never loads the SDK
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from runs.mcpserver.tools import server

            self._ready = asyncio.Event()
            self._manager = StreamableHTTPSessionManager(
                app=server,
                stateless=True,
                max_request_body_size=int(conf().max_body_bytes),
            )
            self._holder = asyncio.get_running_loop().create_task(
                self._hold(), name="mcp-session-manager"
            )
        ready = self._ready
        await ready.wait()
        if self._holder is None or self._holder.done():
            if self._ready is ready:  # it failed: the next request starts a new one
                self._ready = None
            raise RuntimeError("the MCP session manager did not start")
        return self._manager

    async def _hold(self) -> None:
        assert self._ready is not None
        ready = self._ready
        try:
            async with self._manager.run():
                ready.set()
                await asyncio.Event().wait()  # as long as the loop runs
        except BaseException:
            logger.exception("the MCP session manager stopped")
            raise
        finally:
            ready.set()  # requests waiting for it hear that it ended

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        host = _header(scope, b"host") or ""
        domain, _port = split_domain_port(host)
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            await _refuse(send, 400, "This host is not served here (ALLOWED_HOSTS).")
            return
        try:
            token = _token_of(scope)
            client = (_header(scope, b"user-agent") or "")[:200]
            asker = await sync_to_async(_asker)(token, client)
        except AuthFailed as exc:
            await _refuse(send, exc.status, exc.reason, auth=exc.status == 401)
            return
        try:
            manager = await self._started()
        except RuntimeError as exc:
            await _refuse(send, 503, f"Not available: {exc} (the server log says why).")
            return
        await manager.handle_request({**scope, ASKER_KEY: asker}, receive, send)


application = McpApp()
