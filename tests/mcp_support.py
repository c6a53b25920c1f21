"""What the MCP tests share: the test servers' specs, and the check that no server outlives them."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from runs.presets.mcp import close_all
from runs.presets.mcp.spec import ServerSpec

APP = str(Path(__file__).resolve().parent / "mcp_servers" / "app.py")
ASKING = str(Path(__file__).resolve().parent / "mcp_servers" / "asking.py")
BIN = Path(sys.executable).parent


@pytest.fixture
async def notebook_servers() -> AsyncIterator[None]:
    """Generous MCP timeouts for notebook tests; afterwards no session or server is left."""
    with override_settings(
        AGENTUI_MCP_TIMEOUT_S=20.0, AGENTUI_MCP_START_TIMEOUT_S=20.0
    ):
        yield
    await close_all()
    assert server_children() == []


def own_spec(mode: str = "ok", name: str = "own", pk: int = 1) -> ServerSpec:
    return ServerSpec(
        pk=pk, name=name, transport="stdio", command=sys.executable, args=(APP, mode)
    )


def time_spec(pk: int = 2) -> ServerSpec:
    return ServerSpec(
        pk=pk,
        name="time",
        transport="stdio",
        command=str(BIN / "mcp-server-time"),
        args=("--local-timezone", "UTC"),
    )


def git_spec(repo: Path, pk: int = 3) -> ServerSpec:
    return ServerSpec(
        pk=pk,
        name="git",
        transport="stdio",
        command=str(BIN / "mcp-server-git"),
        args=("--repository", str(repo)),
    )


def server_children() -> list[str]:
    """Command lines of this process's children that are MCP servers (alive, not zombies)."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        ours = APP in cmdline or CONTENT_APP in cmdline
        if ppid == me and state != "Z" and ("mcp" in cmdline or ours):
            found.append(cmdline)
    return found


CONTENT_APP = str(Path(__file__).resolve().parent / "mcp_servers" / "content_server.py")


def content_spec(mode: str = "ok", name: str = "content", pk: int = 4) -> ServerSpec:
    """The tests' server returning every kind of content (tests/mcp_servers/content_server.py)."""
    return ServerSpec(
        pk=pk,
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(CONTENT_APP, mode),
    )


async def payloads_of(task_pk: int, kind: str) -> list[dict[str, Any]]:
    """The stored events of one type of a notebook, in order."""
    from runs.models import Event

    return [
        e.payload
        async for e in Event.objects.filter(task_id=task_pk).order_by("seq")
        if e.payload.get("type") == kind
    ]
