"""The `/mcp/` ASGI app's own start (runs/mcpserver/app.py): the SDK's session manager, entered
by the first request because daphne sends no lifespan events, once; one that fails to start
is reported and tried again by the next request, never waited for forever."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp.server import streamable_http_manager

from runs.mcpserver.app import McpApp


class _Manager:
    made = 0
    fails = True

    def __init__(self, **options: Any) -> None:
        type(self).made += 1
        self.options = options

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        if type(self).fails:
            raise OSError("no room")
        yield


async def test_the_manager_starts_once_and_a_failed_start_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        streamable_http_manager, "StreamableHTTPSessionManager", _Manager
    )
    app = McpApp()
    with pytest.raises(RuntimeError, match="did not start"):
        await app._started()
    _Manager.fails = False
    manager = await app._started()
    assert await app._started() is manager
    assert _Manager.made == 2
    assert manager.options["stateless"] is True
    assert app._holder is not None
    app._holder.cancel()
