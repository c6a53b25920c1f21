"""An MCP server's progress and log messages during a call, and the limits a long call runs under.

Against the tests' real stdio server (tests/mcp_servers/app.py `progress`), without the
database: a call runs inside a task whose events are collected, as the runner runs it. Progress
every few tens of ms reaches the call's events throttled, the last one always; a server that
reports is not cut off by the plain timeout, one that goes quiet is (the idle timeout), and one
that reports for ever meets the hard maximum; each error says which limit passed. A call cut
off (a limit, or the task cancelled as Stop does) is cancelled at the server, which notes it.
Log messages below the admin's level are dropped, the rest reach the card (capped) and the log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runs.engine import AgentEvent, Task, ToolLog, ToolProgress
from runs.engine.tool_context import running_for
from runs.presets.mcp import close_all
from runs.presets.mcp.progress import MAX_LOG_CHARS, MAX_LOGS_PER_CALL, PROGRESS_EVERY_S
from runs.presets.mcp.spec import ServerSpec
from runs.presets.mcp.tools import call_mcp_tool
from tests.live_support import until_true
from tests.mcp_support import APP, bare_servers  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def no_server_left(bare_servers: None) -> None:
    """Every test here ends with no MCP server left (tests.mcp_support)."""


def progress_spec(notes: Path | None = None, **limits: Any) -> ServerSpec:
    env = (("AGENTUI_TEST_NOTES", str(notes)),) if notes else ()
    return ServerSpec(
        pk=7,
        name="long",
        transport="stdio",
        command=sys.executable,
        args=(APP, "progress"),
        env=env,
        **limits,
    )


class Recorded:
    """A task whose events are kept, with their arrival times, as the runner's sink would."""

    def __init__(self) -> None:
        self.task = Task(input="long work")
        self.events: list[tuple[float, AgentEvent]] = []
        self.task.set_event_sink(self._keep)

    async def _keep(self, event: AgentEvent) -> None:
        self.events.append((asyncio.get_running_loop().time(), event))

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for _, e in self.events if isinstance(e, kind)]

    async def call(self, spec: ServerSpec, tool: str, arguments: dict[str, Any]) -> Any:
        with running_for(self.task, "step-1", "call-1"):
            return await call_mcp_tool(spec, tool, arguments)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def noted(notes: Path) -> list[str]:
    return notes.read_text().splitlines() if notes.exists() else []


async def test_progress_reaches_the_call_throttled_and_the_last_always() -> None:
    recorded = Recorded()
    done = await recorded.call(progress_spec(), "slow", {"steps": 25, "every_ms": 20})
    assert (done.is_error, done.content) == (False, "done after 25 steps")
    shown = recorded.of(ToolProgress)
    # 25 notes over at least half a second, at most one each PROGRESS_EVERY_S
    assert 2 <= len(shown) < 25, [p.progress for p in shown]
    last = shown[-1]
    assert (last.progress, last.total) == (25.0, 25.0)
    assert (
        last.message == "step 25 of 25 <b>done</b>"
    )  # the server's text, shown as text
    assert (last.tool_id, last.step_id, last.server) == ("call-1", "step-1", "long")
    assert [p.progress for p in shown] == sorted(p.progress for p in shown)
    times = [at for at, e in recorded.events if isinstance(e, ToolProgress)]
    # (the last one heard goes out when the call ends, however soon after the one before)
    gaps = [b - a for a, b in zip(times, times[1:-1])]
    assert min(gaps) >= PROGRESS_EVERY_S * 0.9, gaps
    # the server's warnings (the default level) are on the call's card too
    assert [log.text for log in recorded.of(ToolLog)] == [
        "starting 25 steps",
        "all steps done",
    ]


async def test_progress_without_a_total_is_kept_as_unknown() -> None:
    recorded = Recorded()
    await recorded.call(
        progress_spec(), "slow", {"steps": 3, "every_ms": 10, "total": False}
    )
    last = recorded.of(ToolProgress)[-1]
    assert (last.progress, last.total) == (3.0, None)


async def test_a_server_that_reports_progress_outlives_the_plain_timeout(
    settings: Any,
) -> None:
    settings.AGENTUI_MCP_TIMEOUT_S = 0.4
    recorded = Recorded()
    spec = progress_spec()
    # about 1.2 s, three times the timeout, with a note every 60 ms
    done = await recorded.call(spec, "slow", {"steps": 20, "every_ms": 60})
    assert (done.is_error, done.content) == (False, "done after 20 steps")
    quiet = await call_mcp_tool(spec, "slow", {"steps": 1, "every_ms": 1500})
    assert quiet.content == (
        "Error: the MCP server 'long' did not answer slow within 0.4 s "
        "(AGENTUI_MCP_TIMEOUT_S)"
    )


async def test_a_server_that_goes_quiet_meets_its_idle_timeout_and_is_cancelled(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    recorded = Recorded()
    spec = progress_spec(notes, idle_timeout_s=0.5, max_call_s=30.0)
    stalled = await recorded.call(
        spec, "slow", {"steps": 3, "every_ms": 20, "stall": True}
    )
    assert stalled.is_error
    assert stalled.content == (
        "Error: the MCP server 'long' went quiet during slow: nothing for 0.5 s, its idle "
        "timeout (as set for this server); its last progress was 3 of 3 "
        "(step 3 of 3 <b>done</b>)"
    )
    assert recorded.of(ToolProgress)[-1].progress == 3.0  # delivered before the error
    # the SDK told the server the call was abandoned; the server stopped its work
    await until_true(lambda: noted(notes) == ["cancelled slow"], what="the cancel")


async def test_a_call_that_reports_for_ever_meets_the_hard_maximum(
    settings: Any, tmp_path: Path
) -> None:
    settings.AGENTUI_MCP_TIMEOUT_S = 0.3
    settings.AGENTUI_MCP_MAX_CALL_S = 0.8
    notes = tmp_path / "notes.txt"
    recorded = Recorded()
    endless = await recorded.call(
        progress_spec(notes), "slow", {"steps": 1000, "every_ms": 20}
    )
    assert endless.is_error
    assert endless.content.startswith(
        "Error: the MCP server 'long' did not finish slow within 0.8 s, the hard maximum "
        "of one call (AGENTUI_MCP_MAX_CALL_S); its last progress was "
    )
    step = int(recorded.of(ToolProgress)[-1].progress)
    assert endless.content.endswith(f" of 1000 (step {step} of 1000 <b>done</b>)")
    await until_true(lambda: noted(notes) == ["cancelled slow"], what="the cancel")


async def test_a_cancelled_call_is_cancelled_at_the_server(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    recorded = Recorded()
    spec = progress_spec(notes)
    running = asyncio.create_task(
        recorded.call(spec, "slow", {"steps": 500, "every_ms": 20})
    )
    await until_true(lambda: recorded.of(ToolProgress), what="the first progress")
    running.cancel()  # what Stop does to a running step
    with pytest.raises(asyncio.CancelledError):
        await running
    await until_true(lambda: noted(notes) == ["cancelled slow"], what="the cancel")
    count = len(recorded.of(ToolProgress))
    # the session goes on: the next call is answered, and nothing more of the old one arrives
    again = await call_mcp_tool(spec, "slow", {"steps": 1, "every_ms": 1})
    assert again.content == "done after 1 steps"
    assert len(recorded.of(ToolProgress)) == count


async def test_log_messages_below_the_admins_level_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="runs.mcp_server")
    recorded = Recorded()
    spec = ServerSpec(**{**progress_spec().__dict__, "log_level": "error"})
    assert (await recorded.call(spec, "level", {})).content == "error"  # setLevel sent
    assert (await recorded.call(spec, "chatter", {})).content == "said"
    logs = recorded.of(ToolLog)
    assert [(log.level, log.text) for log in logs] == [
        ("error", "a error message"),
        ("critical", "a critical message"),
        ("alert", "a alert message"),
        ("emergency", "a emergency message"),
        # markup is kept as text (the page sets it as text); control characters go
        ("error", "<img src=x onerror=\"document.title='pwned'\"><b>bold?</b>[31m"),
        ("error", '{"structured": [1, 2]}'),
    ]
    assert logs[0].logger == "chatter" and logs[4].logger == "<i>hostile</i>"
    assert [log.number for log in logs] == [1, 2, 3, 4, 5, 6]
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.ERROR, "MCP server long error (chatter): a error message") in said
    assert (
        logging.CRITICAL,
        "MCP server long emergency (chatter): a emergency message",
    ) in said
    assert not any("a warning message" in text for _, text in said)


async def test_a_debug_level_shows_every_message() -> None:
    recorded = Recorded()
    spec = ServerSpec(**{**progress_spec().__dict__, "log_level": "debug"})
    await recorded.call(spec, "chatter", {})
    assert [log.level for log in recorded.of(ToolLog)][:8] == [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]


async def test_a_flood_of_log_messages_is_capped_on_the_card() -> None:
    recorded = Recorded()
    sent = await recorded.call(
        progress_spec(), "flood", {"count": MAX_LOGS_PER_CALL + 30}
    )
    assert sent.content == f"sent {MAX_LOGS_PER_CALL + 30}"
    logs = recorded.of(ToolLog)
    assert len(logs) == MAX_LOGS_PER_CALL + 1
    assert all(len(log.text) <= MAX_LOG_CHARS for log in logs)
    assert logs[0].text.startswith("message 1 xxx") and logs[0].text.endswith("…")
    last = logs[-1]
    assert (last.omitted, last.number, last.text) == (30, MAX_LOGS_PER_CALL + 30, "")


async def test_progress_and_log_messages_over_streamable_http(tmp_path: Path) -> None:
    port = free_port()
    notes = tmp_path / "notes.txt"
    process = subprocess.Popen(
        [sys.executable, APP, "progress-http", str(port)],
        env={**os.environ, "AGENTUI_TEST_NOTES": str(notes)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await until_true(lambda: listening(port), what="the HTTP MCP server to listen")
        spec = ServerSpec(
            pk=8, name="web", transport="http", url=f"http://127.0.0.1:{port}/mcp"
        )
        recorded = Recorded()
        done = await recorded.call(spec, "slow", {"steps": 8, "every_ms": 40})
        assert done.content == "done after 8 steps"
        assert recorded.of(ToolProgress)[-1].progress == 8.0
        assert [log.text for log in recorded.of(ToolLog)] == [
            "starting 8 steps",
            "all steps done",
        ]
        # a cut-off call is abandoned over HTTP too: the server stops its work
        running = asyncio.create_task(
            recorded.call(spec, "slow", {"steps": 500, "every_ms": 20})
        )
        count = len(recorded.of(ToolProgress))
        await until_true(
            lambda: len(recorded.of(ToolProgress)) > count, what="new progress"
        )
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await until_true(lambda: noted(notes) == ["cancelled slow"], what="the cancel")
        await close_all()
    finally:
        process.terminate()
        process.wait(timeout=20)


async def test_log_messages_with_two_calls_running_go_to_the_log_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a stdio server's log message names no call: with two on its session, it is neither's
    caplog.set_level(logging.WARNING, logger="runs.mcp_server")
    spec = progress_spec()
    slow, chatty = Recorded(), Recorded()
    running = asyncio.create_task(
        slow.call(spec, "slow", {"steps": 40, "every_ms": 30})
    )
    await until_true(lambda: slow.of(ToolProgress), what="the slow call's progress")
    assert (await chatty.call(spec, "chatter", {})).content == "said"
    assert not running.done()
    assert (await running).content == "done after 40 steps"
    assert chatty.of(ToolLog) == []
    assert [log.text for log in slow.of(ToolLog)] == [
        "starting 40 steps",
        "all steps done",
    ]
    assert "MCP server long error (chatter): a error message" in caplog.messages
