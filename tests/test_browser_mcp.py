"""MCP tools in Chromium: an admin configures servers in Django admin (their tools fetched; a
hostile server's names and descriptions shown as text or left out), a person ticks MCP tools
for a new notebook, edits one call's arguments, approves, and sees the results.
Screenshots: mcp-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    scripted_model,
    shots_at_both_sizes,
)
from mcp_support import APP

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

pytestmark = pytest.mark.browser

QUESTION = "Add 2 and 3 and echo hello, with the MCP tools."


def rules() -> list[Rule]:
    asks = Match(last_user_contains=QUESTION)
    return [
        Rule(
            name="calls",
            match=asks.model_copy(update={"tool_results_since_user": 0}),
            reply=Reply(
                tool_calls=[
                    ToolCallSpec(
                        name="own__add", id="call_add", arguments={"a": 2, "b": 3}
                    ),
                    ToolCallSpec(
                        name="own__echo", id="call_echo", arguments={"text": "hello"}
                    ),
                ]
            ),
        ),
        Rule(
            name="answer",
            match=asks.model_copy(update={"tool_results_since_user": 2}),
            reply=Reply(text="The MCP server added them and echoed."),
        ),
    ]


def add_server(
    page: Any,
    app: LiveApp,
    name: str,
    mode: str,
    script: str = APP,
    trusted: bool = False,
    fields: dict[str, str] | None = None,
) -> str:
    """Configure a stdio server of the tests' `script` in the admin; returns the admin's message.
    `trusted`: marked trusted with read-only tools run unasked (the form first refuses the
    second alone); `fields`: other inputs to fill, by their id."""
    page.goto(f"{app.url}/admin/runs/mcpserver/add/")
    page.fill("#id_name", name)
    page.fill("#id_command", sys.executable)
    page.fill("#id_args", json.dumps([script, mode]))
    page.check("#id_everyone")
    for field, value in (fields or {}).items():
        if page.locator(f"#{field}").evaluate("e => e.tagName") == "SELECT":
            page.select_option(f"#{field}", value)
        else:
            page.fill(f"#{field}", value)
    if trusted:
        page.check("#id_read_only_unasked")
        page.get_by_role("button", name="Save", exact=True).click()
        refused = page.locator(".field-read_only_unasked .errorlist")
        refused.wait_for()
        assert "Mark the server trusted first" in refused.inner_text()
        page.check("#id_trusted")
    page.get_by_role("button", name="Save", exact=True).click()
    message = page.locator("ul.messagelist li", has_text=f"MCP server {name}:")
    message.wait_for(timeout=60_000)
    return str(message.text_content()).strip()


def test_configure_a_server_pick_its_tools_edit_and_approve_a_call(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=rules()), reset_log=True)
    said = add_server(page, live_app, "own", "ok")
    assert said.startswith("MCP server own: fetched 4 tools"), said
    said = add_server(page, live_app, "hostile", "hostile")
    assert said.startswith("MCP server hostile: fetched 1 tool"), said
    assert "left out 'bad name<script>alert(1)</script>'" in said
    page.locator("#result_list").get_by_role("link", name="hostile").click()
    tool_list = page.locator(".field-tool_list")
    assert (
        "<img src=x onerror=alert(1)>" in tool_list.inner_text()
    )  # as text, not an image
    assert tool_list.locator("img").count() == 0
    tool_list.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-01-admin-server")

    page.goto(f"{live_app.url}/new/")
    page.get_by_label("Message").fill(QUESTION)
    page.get_by_label("Agent").select_option("function_calling")
    page.get_by_label("Approval").select_option("tools")
    tools = page.locator("fieldset.mcp-tools")
    assert tools.locator("input[name=mcp_tools]").count() == 5
    shout = tools.locator("label.mcp-tool", has_text="hostile__shout")
    assert "<img src=x" in shout.inner_text() and shout.locator("img").count() == 0
    tools.locator("input[value=own__add]").check()
    tools.locator("input[value=own__echo]").check()
    shots_at_both_sizes(page, artifacts_dir, "mcp-02-new-notebook")
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/tasks/*/")
    assert page.locator(".badge-mcp").all_inner_texts() == ["own__add", "own__echo"]

    calls_step = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable"),
    )
    calls_step.wait_for()
    offered = {t["function"]["name"] for t in scripted_model.requests[0].tools}
    assert {"own__add", "own__echo"} <= offered and "hostile__shout" not in offered
    add_args = calls_step.get_by_label("Arguments for own__add (JSON)")
    add_args.fill('{"a": "twenty", "b": 22}')
    calls_step.get_by_role("button", name="Save edits").click()
    refused = calls_step.locator("[data-error-slot^='edit:']")
    refused.wait_for()
    assert "'twenty' is not of type 'integer'" in refused.inner_text()
    add_args.fill('{"a": 20, "b": 22}')
    calls_step.get_by_role("button", name="Approve and run").click()

    page.locator(".cell-answer").wait_for(timeout=60_000)
    told = {
        m.get("tool_call_id"): m.get("content")
        for m in scripted_model.requests[-1].messages
        if m.get("role") == "tool"
    }
    assert told == {"call_add": "42", "call_echo": "echo: hello"}
    ran = page.locator(".tool-card.status-completed", has_text="own__add")
    assert '"a": 20' in ran.locator(".tool-args").inner_text()
    assert "42" in ran.inner_text()
    shots_at_both_sizes(page, artifacts_dir, "mcp-03-notebook-ran")
    assert not page.console_errors, page.console_errors
