"""MCP roots and server health (issue 45, items 3 and 7), over real stdio test servers.

Roots: `roots/list` answers exactly the admin's roots (none: an empty list), and a running
session is told when they change. Health: each server's state and last error in this process,
in `/readyz` (degraded, never unready) and the admin; a server's changed tool list is listed
again; the admin shows the tools a server's listing had that were refused, with why.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.test import AsyncClient, Client

from runs.models import McpServer, root_uris
from runs.presets.mcp import close_all
from runs.presets.mcp.connections import open_count
from runs.presets.mcp.health import ServerState, forget_all, health_of
from runs.presets.mcp.spec import ServerSpec
from runs.presets.mcp.tools import call_mcp_tool
from tests.live_support import (
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    server,  # noqa: F401  (fixture: a scripted model, as the LLM)
    until_true,
)
from tests.mcp_support import (  # noqa: F401  (fixture)
    APP,
    bare_servers,
    own_spec,
    server_children,
)

# the ORM thread's connection is closed after each test (close_db_connections)
pytestmark = pytest.mark.django_db(transaction=True)

ROOTS_APP = str(Path(__file__).resolve().parent / "mcp_servers" / "roots_server.py")


@pytest.fixture(autouse=True)
def fresh_health(bare_servers: None) -> Iterator[None]:
    """No server's state carried over from another test; no server left afterwards."""
    forget_all()
    yield
    forget_all()


def roots_spec(roots: tuple[str, ...] = (), pk: int = 11) -> ServerSpec:
    return ServerSpec(
        pk=pk,
        name="rooted",
        transport="stdio",
        command=sys.executable,
        args=(ROOTS_APP,),
        roots=roots,
    )


# roots


def test_roots_are_absolute_paths_or_file_uris_and_bad_lines_are_named() -> None:
    text = "/srv/data\n\n  file:///home/ana/notes  \n/srv/ä b\nfile://localhost/tmp\n/srv/data\n"
    assert root_uris(text) == [
        "file:///srv/data",
        "file:///home/ana/notes",
        "file:///srv/%C3%A4%20b",
        "file:///tmp",
    ]
    assert root_uris("") == []
    with pytest.raises(ValidationError) as refused:
        root_uris("relative/dir\nhttps://example.org/repo\n/fine\nfile:relative")
    messages = refused.value.messages
    assert messages[0] == (
        "root 1 ('relative/dir'): a path must be absolute (start with /), or give a "
        "file:// URI"
    )
    assert messages[1].startswith("root 2 ('https://example.org/repo'): https: is not")
    assert len(messages) == 2  # /fine is fine; file:relative is file:///relative


async def test_roots_list_answers_exactly_the_admins_roots() -> None:
    roots = ("file:///srv/data", "file:///home/ana/notes%20and%20more")
    answer = await call_mcp_tool(roots_spec(roots), "roots", {})
    assert not answer.is_error, answer.content
    assert json.loads(answer.content) == list(roots)


async def test_roots_list_answers_an_empty_list_when_there_are_none() -> None:
    answer = await call_mcp_tool(roots_spec(), "roots", {})
    assert not answer.is_error, answer.content
    assert json.loads(answer.content) == []


async def test_changed_roots_are_told_to_the_running_session_not_restarted() -> None:
    spec = replace(roots_spec(("file:///srv/old",)), saved_at=1.0)
    assert json.loads((await call_mcp_tool(spec, "roots", {})).content) == [
        "file:///srv/old"
    ]
    assert (await call_mcp_tool(spec, "heard", {})).content == "0"
    new = ["file:///srv/new", "file:///srv/other"]
    edited = replace(spec, roots=tuple(new), saved_at=2.0)
    assert json.loads((await call_mcp_tool(edited, "roots", {})).content) == new
    assert (await call_mcp_tool(edited, "heard", {})).content == "1"
    # a runner built before the edit (not yet rebuilt) does not put the old roots back
    assert json.loads((await call_mcp_tool(spec, "roots", {})).content) == new
    assert (await call_mcp_tool(spec, "heard", {})).content == "1"
    assert open_count() == 1 and len(server_children()) == 1  # the same session


# health


async def test_a_failing_start_is_failing_with_its_error_and_a_good_one_connected() -> (
    None
):
    broken = own_spec("nostart", name="broken", pk=21)
    assert health_of(21).state == ServerState.STOPPED  # never started here
    said = await call_mcp_tool(broken, "add", {"a": 1, "b": 2})
    assert said.is_error
    health = health_of(21)
    assert health.state == ServerState.FAILING
    assert "did not start" in health.last_error
    assert "cannot start: the test asked me not to" in health.last_error
    assert health.last_error_at is not None
    fine = own_spec(pk=22)
    assert (await call_mcp_tool(fine, "add", {"a": 1, "b": 2})).content == "3"
    assert health_of(22).state == ServerState.CONNECTED
    assert health_of(22).last_error == ""
    await close_all()
    assert health_of(22).state == ServerState.STOPPED
    assert health_of(21).state == ServerState.FAILING  # closing forgets no failure


async def test_a_server_that_stops_by_itself_is_failing_until_it_is_back(
    tmp_path: Path,
) -> None:
    notes = (("AGENTUI_TEST_NOTES", str(tmp_path / "notes")),)
    spec = replace(own_spec("mortal", name="mortal", pk=23), env=notes)
    died = await call_mcp_tool(spec, "die", {"text": "bye"})
    assert died.is_error and "stopped during die" in died.content
    await until_true(lambda: health_of(23).state == ServerState.FAILING)
    assert "its session ended" in health_of(23).last_error
    assert (await call_mcp_tool(spec, "add", {"a": 2, "b": 2})).content == "4"
    assert health_of(23).state == ServerState.CONNECTED
    assert "its session ended" in health_of(23).last_error  # kept, with its time


# a server's changed tools, readyz and the admin need rows


def _roots_row() -> McpServer:
    from runs.presets.mcp import refresh_listing

    server = McpServer.objects.create(
        name="rooted", command=sys.executable, args=[ROOTS_APP], everyone=True
    )
    said = refresh_listing(server)
    assert said.startswith("fetched 3 tools"), said
    return server


async def test_a_servers_tools_list_changed_lists_its_tools_again() -> None:
    server = await sync_to_async(_roots_row)()
    before = server.updated_at
    grew = await call_mcp_tool(ServerSpec.of(server), "grow", {})
    assert grew.content == "grew"

    async def listed() -> McpServer | None:
        row = await McpServer.objects.aget(pk=server.pk)
        return row if "rooted__grown" in [t["name"] for t in row.tools] else None

    row = await until_true(listed, what="the grown tool in the stored listing")
    assert row.tools_note.startswith("fetched 4 tools")
    assert row.updated_at > before  # notebooks' runners are rebuilt with it
    assert open_count() == 1  # listed again on the running session


@pytest.mark.db
async def test_readyz_says_each_mcp_servers_state_and_degraded_but_ready(
    server: Any,  # noqa: F811
) -> None:
    broken = await McpServer.objects.acreate(
        name="broken", command=sys.executable, args=[APP, "nostart"]
    )
    await McpServer.objects.acreate(name="idle", command=sys.executable, args=[APP])
    await McpServer.objects.acreate(
        name="off", command=sys.executable, args=[APP], enabled=False
    )
    assert (await call_mcp_tool(ServerSpec.of(broken), "add", {})).is_error
    response = await AsyncClient().get("/readyz")
    body = response.json()
    # a failing MCP server never makes the process unready: only its tools' calls fail
    assert response.status_code == 200, body
    assert body["status"] == "degraded"
    assert body["checks"] == {"database": "ok", "channel_layer": "ok", "model": "ok"}
    # enabled ones only, counted by state: anyone may ask, and the names are the admin's
    assert body["mcp"] == {"failing": 1, "stopped": 1}
    assert body["degraded"] == 1
    # why is in the log and the admin, not in the unauthenticated answer
    assert "cannot start" not in response.content.decode()
    assert "broken" not in response.content.decode()
    # a staff member (who could open the admin anyway) sees which one
    staff = AsyncClient()
    await staff.aforce_login(await sync_to_async(_staff_user)())
    named = (await staff.get("/readyz")).json()
    assert named["mcp"] == {"broken": "failing", "idle": "stopped"}
    assert named["degraded"] == ["broken"]


# the admin


def _staff_user() -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", "root@example.org", "pw")


def _admin_client() -> Client:
    client = Client()
    client.force_login(_staff_user())
    return client


def _form(name: str, args: list[str], roots: str) -> dict[str, str]:
    return {
        "name": name,
        "description": "",
        "transport": "stdio",
        "command": sys.executable,
        "args": json.dumps(args),
        "env": "{}",
        "url": "",
        "headers": "{}",
        "enabled": "on",
        "log_level": "warning",
        "roots": roots,
    }


def test_the_admin_takes_roots_shows_state_last_error_and_hidden_tools() -> None:
    client = _admin_client()
    refused = client.post(
        "/admin/runs/mcpserver/add/",
        _form("hostile", [APP, "hostile"], "data/here\nhttps://example.org/x"),
    )
    assert refused.status_code == 200  # the form again, nothing saved
    page = refused.content.decode()
    assert "a path must be absolute" in page and "https: is not a root" in page
    assert not McpServer.objects.exists()

    saved = client.post(
        "/admin/runs/mcpserver/add/",
        _form("hostile", [APP, "hostile"], "/srv/data\nfile:///srv/more"),
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    server = McpServer.objects.get(name="hostile")
    assert server.roots == "file:///srv/data\nfile:///srv/more"
    assert ServerSpec.of(server).roots == ("file:///srv/data", "file:///srv/more")
    assert [t["tool"] for t in server.tools_left_out] == [
        "bad name<script>alert(1)</script>",
        "n" * 80,
    ]

    detail = client.get(f"/admin/runs/mcpserver/{server.pk}/change/").content.decode()
    # the hostile name is shown escaped, with why it was left out
    assert (
        "<code>bad name&lt;script&gt;alert(1)&lt;/script&gt;</code> left out: as "
        in (detail)
    )
    assert "<script>alert(1)</script>" not in detail
    assert "does not say which" in detail  # what a server may hide without a word
    assert "stopped" in detail  # its listing's own session is no state

    from runs.presets.mcp.health import note_failure

    note_failure(server.pk, "the server wrote <b>oops</b>")
    listing = client.get("/admin/runs/mcpserver/").content.decode()
    assert "failing" in listing
    assert "the server wrote &lt;b&gt;oops&lt;/b&gt;" in listing
    assert "UTC" in listing
