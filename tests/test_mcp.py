"""MCP servers as tool sources, without the database: real servers over stdio and HTTP.

Third-party servers from PyPI (mcp-server-time, mcp-server-git on a repository made here) and
the tests' own (tests/mcp_servers/app.py): one that works, tools that fail or hang, a server that
does not start, one whose tools have hostile names and descriptions. Every test ends with no
server process left.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runs.engine.errors import ToolArgumentsError
from runs.presets.mcp import close_all
from runs.presets.mcp.connections import open_count, stopped
from runs.presets.mcp.listing import MAX_DESCRIPTION_CHARS, checked_tools, fetch_listing
from runs.presets.mcp.spec import ServerSpec
from runs.presets.mcp.tools import McpToolChoice, _engine_tool, call_mcp_tool
from tests.live_support import until_true
from tests.loop_lag import max_lag_while
from tests.mcp_support import (  # noqa: F401  (fixture)
    APP,
    bare_servers,
    git_spec,
    own_spec,
    server_children,
    time_spec,
)


@pytest.fixture(autouse=True)
def no_server_left(bare_servers: None) -> None:
    """Every test here ends with no MCP server left (tests.mcp_support)."""


async def test_the_time_server_answers_and_its_session_is_reused() -> None:
    spec = time_spec()
    tokyo = await call_mcp_tool(spec, "get_current_time", {"timezone": "Asia/Tokyo"})
    assert not tokyo.is_error, tokyo.content
    assert tokyo.raw_output["timezone"] == "Asia/Tokyo"
    assert "+09:00" in tokyo.raw_output["datetime"]
    london = await call_mcp_tool(
        spec, "get_current_time", {"timezone": "Europe/London"}
    )
    assert london.raw_output["timezone"] == "Europe/London"
    assert open_count() == 1 and len(server_children()) == 1  # one process, two calls


async def test_a_server_side_error_is_that_calls_error_only() -> None:
    spec = time_spec()
    bad = await call_mcp_tool(
        spec, "get_current_time", {"timezone": "Nowhere/Atlantis"}
    )
    assert bad.is_error
    assert bad.content.startswith(
        "Error: the MCP server 'time' said get_current_time failed"
    )
    assert "Nowhere/Atlantis" in bad.content
    good = await call_mcp_tool(spec, "get_current_time", {"timezone": "UTC"})
    assert not good.is_error and good.raw_output["timezone"] == "UTC"


async def test_the_git_server_reads_a_repository_made_here(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = [
        "git",
        "-C",
        str(repo),
        "-c",
        "user.name=Ana",
        "-c",
        "user.email=ana@example.org",
    ]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "notes.txt").write_text("first line\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Add the notes"], check=True)
    (repo / "notes.txt").write_text("first line\nsecond line\n")
    listed = await fetch_listing(git_spec(repo))
    assert {"git_status", "git_log", "git_diff_unstaged"} <= {t["name"] for t in listed}
    log = await call_mcp_tool(git_spec(repo), "git_log", {"repo_path": str(repo)})
    assert not log.is_error, log.content
    assert "Add the notes" in log.content
    diff = await call_mcp_tool(
        git_spec(repo), "git_diff_unstaged", {"repo_path": str(repo)}
    )
    assert "+second line" in diff.content


async def test_own_server_tools_work_fail_and_hang_each_on_its_own(
    settings: Any,
) -> None:
    spec = own_spec()
    added = await call_mcp_tool(spec, "add", {"a": 2, "b": 40})
    assert (added.content, added.is_error) == ("42", False)
    failed = await call_mcp_tool(spec, "fail", {"reason": "the test"})
    assert failed.is_error and "failing as asked: the test" in failed.content
    settings.AGENTUI_MCP_TIMEOUT_S = 2.0
    hung = await call_mcp_tool(spec, "hang", {})
    assert hung.is_error
    assert hung.content == (
        "Error: the MCP server 'own' did not answer hang within 2 s (AGENTUI_MCP_TIMEOUT_S)"
    )
    again = await call_mcp_tool(spec, "echo", {"text": "still here"})
    assert again.content == "echo: still here"


async def test_a_server_that_does_not_start_says_why_on_each_call() -> None:
    spec = own_spec("nostart", name="broken")
    first = await call_mcp_tool(spec, "add", {"a": 1, "b": 2})
    assert first.is_error
    assert first.content.startswith("Error: the MCP server 'broken' did not start")
    assert "cannot start: the test asked me not to" in first.content
    missing = ServerSpec(
        pk=9, name="nowhere", transport="stdio", command="/no/such/mcp-server"
    )
    second = await call_mcp_tool(missing, "add", {"a": 1, "b": 2})
    assert (
        second.is_error
        and "did not start: no program /no/such/mcp-server" in second.content
    )
    # the other servers go on
    assert (await call_mcp_tool(own_spec(), "add", {"a": 1, "b": 2})).content == "3"


async def test_a_server_that_hangs_at_start_times_out(
    settings: Any, tmp_path: Path
) -> None:
    settings.AGENTUI_MCP_START_TIMEOUT_S = 1.0
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(600)\n")
    spec = ServerSpec(
        pk=5,
        name="slow",
        transport="stdio",
        command=sys.executable,
        args=(str(sleeper),),
    )
    out = await call_mcp_tool(spec, "add", {"a": 1, "b": 2})
    assert out.content == (
        "Error: the MCP server 'slow' did not start within 1 s (AGENTUI_MCP_START_TIMEOUT_S)"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_streamable_http_server() -> None:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, APP, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        await until_true(listening, what="the HTTP MCP server to listen")
        spec = ServerSpec(
            pk=7,
            name="web",
            transport="http",
            url=f"http://127.0.0.1:{port}/mcp",
            headers=(("X-Team", "analysts"),),
        )
        assert (await call_mcp_tool(spec, "add", {"a": 20, "b": 22})).content == "42"
        failed = await call_mcp_tool(spec, "fail", {"reason": "over http"})
        assert failed.is_error and "over http" in failed.content
        await close_all()
    finally:
        process.terminate()
        process.wait(timeout=20)


async def test_hostile_names_and_descriptions_are_checked() -> None:
    listed = await fetch_listing(own_spec("hostile", name="hostile"))
    tools, notes = checked_tools("hostile", listed)
    assert [t["name"] for t in tools] == ["hostile__shout"]
    description = tools[0]["description"]
    assert len(description) <= MAX_DESCRIPTION_CHARS and "\x1b" not in description
    assert any("bad name<script>" in note and "left out" in note for note in notes)
    assert any(("n" * 60) in note for note in notes)
    assert len(notes) == 2


def test_names_that_fit_alone_but_not_with_the_server_prefix_are_left_out() -> None:
    schema = {"type": "object", "properties": {}}
    listed = [
        {"name": "t" * 60, "description": "", "input_schema": schema},
        {"name": "ok", "description": None, "input_schema": {"type": "array"}},
        {
            "name": "ok",
            "description": "x",
            "input_schema": {"type": "object", "properties": 3},
        },
        {"name": "fine-name.v2", "description": "", "input_schema": schema},
        {"name": "fine", "description": "", "input_schema": schema},
    ]
    tools, notes = checked_tools("server", listed)
    assert [t["name"] for t in tools] == ["server__fine"]
    assert len(notes) == 4
    assert "not of type object" in notes[1] and "invalid" in notes[2]


async def test_an_mcp_tool_checks_arguments_against_the_servers_schema() -> None:
    listed = await fetch_listing(own_spec())
    tools, _ = checked_tools("own", listed)
    add = next(t for t in tools if t["name"] == "own__add")
    tool = _engine_tool(own_spec(), add)
    assert tool.metadata.openai_tool["function"]["parameters"]["required"] == ["a", "b"]
    assert tool.problems({"a": 1}) == [("arguments", "'b' is a required property")]
    with pytest.raises(ToolArgumentsError, match="a: 'one' is not of type 'integer'"):
        tool.validate({"a": "one", "b": 2})
    refused = await tool.acall(a="one", b=2)
    assert refused.is_error and "do not fit its schema" in refused.content
    assert open_count() == 0  # refused before any server started
    output = await tool.acall(a=1, b=2)
    assert (output.content, output.tool_name, output.raw_input) == (
        "3",
        "own__add",
        {"a": 1, "b": 2},
    )
    assert isinstance(McpToolChoice("own__add", "own", "add", ""), McpToolChoice)
    assert (
        json.loads(json.dumps(tool.metadata.openai_tool))["function"]["name"]
        == "own__add"
    )


async def test_the_shipped_demo_clock_answers_as_the_time_server_does() -> None:
    clock = ServerSpec(
        pk=11,
        name="clock",
        transport="stdio",
        command=sys.executable,
        args=("-m", "runs.demo.mcp_clock"),
    )
    listed = await fetch_listing(clock)
    assert sorted(t["name"] for t in listed) == [
        "get_current_time",
        "set_alarm",
        "sync_clock",
    ]
    (stored,), _ = checked_tools(
        "clock", [t for t in listed if t["name"] == "get_current_time"]
    )
    assert (stored["title"], stored["hints"]) == (
        "Current time",
        {"readOnlyHint": True, "openWorldHint": False},
    )
    tokyo = await call_mcp_tool(clock, "get_current_time", {"timezone": "Asia/Tokyo"})
    assert tokyo.raw_output["timezone"] == "Asia/Tokyo"
    assert tokyo.raw_output["datetime"].endswith("+09:00")
    nowhere = await call_mcp_tool(clock, "get_current_time", {"timezone": "Mars/Base"})
    assert nowhere.is_error and "unknown timezone 'Mars/Base'" in nowhere.content
    synced = await call_mcp_tool(clock, "sync_clock", {"seconds": 1})
    assert synced.content.startswith("the clock is in sync: 60 samples compared")


async def test_parallel_first_calls_share_one_server() -> None:
    spec = own_spec()
    outputs = await asyncio.gather(
        *(call_mcp_tool(spec, "add", {"a": n, "b": 1}) for n in range(5))
    )
    assert [o.content for o in outputs] == ["1", "2", "3", "4", "5"]
    assert open_count() == 1 and len(server_children()) == 1


async def test_an_edited_server_is_restarted_once_for_parallel_calls() -> None:
    before = own_spec()
    assert (await call_mcp_tool(before, "add", {"a": 1, "b": 1})).content == "2"
    edited = ServerSpec(**{**before.__dict__, "env": (("EDITED", "1"),)})
    outputs = await asyncio.gather(
        *(call_mcp_tool(edited, "add", {"a": n, "b": 1}) for n in range(4))
    )
    assert [o.content for o in outputs] == ["1", "2", "3", "4"]
    assert open_count() == 1 and len(server_children()) == 1


async def test_a_servers_backtracking_pattern_is_checked_without_holding_the_loop() -> (
    None
):
    # issue 44: `^(a+)+$` and "a" * 28 + "!" held every user's requests for 12 s
    spec = own_spec("patterns", name="patterns")
    tools, notes = checked_tools("patterns", await fetch_listing(spec))
    assert [t["name"] for t in tools] == ["patterns__lookup"]
    assert notes == [
        "left out 'strong': its input schema has the pattern '^(?=.*[0-9]).{8,}$', which "
        "cannot be checked safely (invalid perl operator: (?=: backreferences and "
        "lookarounds are not supported)"
    ]
    lookup = _engine_tool(spec, tools[0])
    refused, lag = await max_lag_while(lookup.acall(name="a" * 28 + "!"))
    assert lag < 0.1, f"the event loop was held {lag:.2f} s"
    assert refused.is_error and "does not match '^(a+)+$'" in refused.content
    assert open_count() == 0  # refused before the server was started
    found = await lookup.acall(name="aaa")
    assert (found.is_error, found.content) == (False, "found aaa")


def mortal_spec(notes: Path) -> ServerSpec:
    spec = own_spec("mortal", name="mortal")
    return ServerSpec(**{**spec.__dict__, "env": (("AGENTUI_TEST_NOTES", str(notes)),)})


def noted(notes: Path) -> list[str]:
    return notes.read_text().splitlines() if notes.exists() else []


async def test_a_killed_server_is_restarted_by_the_next_call_which_runs_once(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    spec = mortal_spec(notes)
    assert (await call_mcp_tool(spec, "note", {"text": "one"})).content == "noted one"
    pid = int((await call_mcp_tool(spec, "pid", {})).content)
    os.kill(pid, signal.SIGKILL)
    await until_true(
        lambda: stopped(spec), what="the session noticing the server stopped"
    )
    # before: "Connection closed" on every call until daphne restarted
    again = await call_mcp_tool(spec, "note", {"text": "two"})
    assert (again.is_error, again.content) == (False, "noted two")
    assert noted(notes) == ["one", "two"]  # each call ran once
    assert int((await call_mcp_tool(spec, "pid", {})).content) != pid
    assert open_count() == 1 and len(server_children()) == 1  # the dead one was reaped


async def test_a_call_the_server_stopped_under_is_not_sent_again(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    spec = mortal_spec(notes)
    died = await call_mcp_tool(spec, "die", {"text": "dying"})
    assert died.is_error
    assert died.content.startswith(
        "Error: the MCP server 'mortal' stopped during die ("
    )
    assert died.content.endswith("it is restarted on the next call")
    after = await call_mcp_tool(spec, "note", {"text": "after"})
    assert (after.is_error, after.content) == (False, "noted after")
    assert noted(notes) == ["dying", "after"]  # die ran once: its call was not re-sent


async def test_a_server_that_keeps_stopping_waits_before_its_next_restart(
    tmp_path: Path, settings: Any
) -> None:
    notes = tmp_path / "notes.txt"
    spec = mortal_spec(notes)
    settings.AGENTUI_MCP_RESTART_BACKOFF_S = 30.0
    for text in ("first", "second"):  # the second call restarts it, and it stops again
        died = await call_mcp_tool(spec, "die", {"text": text})
        assert "stopped during die" in died.content
    waits = await call_mcp_tool(spec, "note", {"text": "too soon"})
    assert waits.is_error
    # the wait left is counted from the second stop: a loaded machine may have spent a second
    # or two of it already
    said = re.fullmatch(
        r"Error: the MCP server 'mortal' stopped again after being restarted; it is "
        r"restarted on a call in (\d+) s: retry then \(AGENTUI_MCP_RESTART_BACKOFF_S\)",
        waits.content,
    )
    assert said and 20 <= int(said[1]) <= 30, waits.content
    assert server_children() == []  # nothing started meanwhile
    settings.AGENTUI_MCP_RESTART_BACKOFF_S = 0.0
    later = await call_mcp_tool(spec, "note", {"text": "later"})
    assert (later.is_error, later.content) == (False, "noted later")
    assert noted(notes) == ["first", "second", "later"]
    # a call went through: the next stop restarts it at once again
    settings.AGENTUI_MCP_RESTART_BACKOFF_S = 30.0
    await call_mcp_tool(spec, "die", {"text": "third"})
    assert not (await call_mcp_tool(spec, "note", {"text": "fourth"})).is_error
