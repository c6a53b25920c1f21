"""What the MCP tests share: the test servers' specs, and the check that no server outlives them."""

from __future__ import annotations

import json
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
async def bare_servers(settings: Any) -> AsyncIterator[None]:
    """Generous MCP timeouts for tests without a notebook; afterwards no session or server is
    left."""
    from runs.presets.mcp.connections import open_count

    settings.AGENTUI_MCP_TIMEOUT_S = 20.0
    settings.AGENTUI_MCP_START_TIMEOUT_S = 20.0
    yield
    await close_all()
    assert open_count() == 0
    assert server_children() == []


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


def stdio_server(name: str, args: list[str], tools: int, **fields: Any) -> Any:
    """An MCP server row run by this Python, for everyone, its `tools` tools fetched (ORM)."""
    from runs.models import McpServer
    from runs.presets.mcp import refresh_listing

    server = McpServer.objects.create(
        name=name, command=sys.executable, args=args, everyone=True, **fields
    )
    said = refresh_listing(server)
    assert said.startswith(f"fetched {tools} tools"), said
    return server


def demo_clock_notebook(tool: str) -> Any:
    """The demo clock configured for everyone, and a notebook of a new user's with `tool` of it
    (run in a thread: it uses the ORM)."""
    from runs import service
    from tests.live_support import make_user

    ana = make_user("ana")
    stdio_server("clock", ["-m", "runs.demo.mcp_clock"], 3)
    return service.create_notebook_row(ana, "function_calling", "auto", [tool])


def add_stdio_server(app: Any, name: str, args: list[str]) -> str:
    """Configure a stdio server run by this Python on a live app (tests.browser_helpers'
    LiveApp), its tools fetched; what the fetch said."""
    return app.shell(
        "import sys\n"
        "from runs.models import McpServer\n"
        "from runs.presets.mcp import refresh_listing\n"
        f"server = McpServer.objects.create(name={name!r}, command=sys.executable, "
        f"args={json.dumps(args)}, everyone=True)\n"
        "print(refresh_listing(server))\n"
    )


def call_then_answer(question: str, tool: str, arguments: dict[str, Any]) -> list[Any]:
    """A scripted model's rules: `question` gets one call of `tool`, its result "Done."."""
    from runs.engine.testing import Match, Reply, Rule, ToolCallSpec

    asks = Match(last_user_contains=question)
    return [
        Rule(
            name="call",
            match=asks.model_copy(update={"tool_results_since_user": 0}),
            reply=Reply(tool_calls=[ToolCallSpec(name=tool, arguments=arguments)]),
        ),
        Rule(
            name="answer",
            match=asks.model_copy(update={"tool_results_since_user": 1}),
            reply=Reply(text="Done."),
        ),
    ]
