"""MCP content and hints in Chromium: an admin marks a server trusted with read-only tools run
without asking (the form refuses the second without the first); a person picks its tools by their
titles; a read-only tool runs without asking, the audit saying why; a call returning every content
type shows a thumbnail, a resource's text, a download, an inert link, a table and what the model
was given; a hostile server's lying images, javascript: link and huge file stay harmless under the
CSP, with no request leaving the origin.
Screenshots: mcp-content-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    scripted_model,
    shots_at_both_sizes,
)
from mcp_support import CONTENT_APP
from test_browser_hostile import watched
from test_browser_mcp import add_server

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

pytestmark = pytest.mark.browser

QUESTION = "Show me the weather and then everything the content tools have."


def rules() -> list[Rule]:
    asks = Match(last_user_contains=QUESTION)
    return [
        Rule(
            name="read",
            match=asks.model_copy(update={"tool_results_since_user": 0}),
            reply=Reply(
                tool_calls=[
                    ToolCallSpec(
                        name="content__read_weather",
                        id="call_weather",
                        arguments={"city": "Lyon"},
                    )
                ]
            ),
        ),
        Rule(
            name="everything",
            match=asks.model_copy(update={"tool_results_since_user": 1}),
            reply=Reply(
                tool_calls=[
                    ToolCallSpec(name="content__show_everything", id="call_all"),
                    ToolCallSpec(name="content__list_cities", id="call_cities"),
                    ToolCallSpec(name="hostile__show_hostile", id="call_hostile"),
                ]
            ),
        ),
        Rule(
            name="answer",
            match=asks.model_copy(update={"tool_results_since_user": 4}),
            reply=Reply(text="That is everything the tools returned."),
        ),
    ]


def test_content_types_and_a_trusted_read_only_tool(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(Script(rules=rules()), reset_log=True)
    page, watch = watched(new_context, live_app)
    said = add_server(page, live_app, "content", "ok", CONTENT_APP, trusted=True)
    assert said.startswith("MCP server content: fetched 5 tools"), said
    page.locator("#result_list").get_by_role("link", name="content").click()
    tool_list = page.locator(".field-tool_list")
    assert "content__read_weather “Read the weather” [read-only, closed world]" in (
        tool_list.inner_text()
    )
    page.locator(".field-trusted").scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-content-01-admin-trusted")
    said = add_server(page, live_app, "hostile", "hostile", CONTENT_APP)
    assert said.startswith("MCP server hostile: fetched 1 tool"), said

    page.goto(f"{live_app.url}/new/")
    page.get_by_label("Message").fill(QUESTION)
    page.get_by_label("Agent").select_option("function_calling")
    page.get_by_label("Approval").select_option("tools")
    tools = page.locator("fieldset.mcp-tools")
    weather = tools.locator("label.mcp-tool", has_text="content__read_weather")
    assert weather.locator(".tool-title").inner_text() == "Read the weather"
    assert weather.locator(".hint-read-only").count() == 1
    destructive = tools.locator("label.mcp-tool", has_text="content__delete_city")
    assert destructive.locator(".hint-destructive").count() == 1
    for name in (
        "content__read_weather",
        "content__show_everything",
        "content__list_cities",
        "hostile__show_hostile",
    ):
        tools.locator(f"input[value={name}]").check()
    weather.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-content-02-picker")
    page.get_by_role("button", name="Start", exact=True).click()
    page.wait_for_url("**/tasks/*/")

    # the read-only tool of the trusted server ran without asking; the next calls wait
    waiting = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable"),
    )
    waiting.wait_for()
    ran = page.locator(".tool-card.status-completed", has_text="content__read_weather")
    ran.wait_for()
    assert ran.locator(".tool-title").inner_text() == "Read the weather"
    assert "sunny in Lyon" in ran.inner_text()
    audit = page.locator("li.human-action.action-auto_approved")
    audit.first.wait_for()
    assert "read-only tool of trusted server content" in audit.first.inner_text()
    assert waiting.locator(".tool-card.editable").count() == 3
    ran.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-content-03-read-only-unasked")

    waiting.get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for(timeout=60_000)

    everything = page.locator(
        ".tool-card.status-completed", has_text="content__show_everything"
    )
    image = everything.locator(".part-image img")
    image.wait_for()
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth === 96", arg=image.element_handle()
    )
    assert image.get_attribute("src").startswith("/api/tasks/")
    resource = everything.locator(".part-resource")
    assert "file:///notes/readme.txt" in resource.inner_text()
    assert "<b>bold</b> is text here." in resource.locator("pre").inner_text()
    assert resource.locator("b").count() == 0
    link = everything.locator(".part-link")
    assert "https://example.org/reports/q3.pdf" in link.inner_text()
    assert link.locator("a").count() == 0  # inert text: never a link off the origin
    saw = everything.locator(".model-saw")
    assert saw.text_content() == "What the model was given"
    given = saw.locator("xpath=following-sibling::pre[1]").inner_text()
    assert "[resource link Q3 report <https://example.org/reports/q3.pdf>" in given
    assert "[image 1: image/png, 12.0 KB, shown to the person]" in given
    with page.expect_download() as download_info:
        everything.locator(".part-blob a", has_text="Download").click()
    download = download_info.value
    assert download.suggested_filename == "table.csv"
    assert Path(download.path()).read_bytes() == b"col1,col2\n1,2\n"
    href = everything.locator(".part-blob a").get_attribute("href")
    headers = page.request.get(f"{live_app.url}{href}").headers
    assert headers["content-type"] == "application/octet-stream"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-disposition"].startswith("attachment;")
    assert headers["content-security-policy"] == "default-src 'none'; sandbox"
    shown = page.request.get(f"{live_app.url}{image.get_attribute('src')}").headers
    assert (shown["content-type"], shown["x-content-type-options"]) == (
        "image/png",
        "nosniff",
    )
    assert shown["content-security-policy"] == "default-src 'none'; sandbox"

    cities = page.locator(
        ".tool-card.status-completed", has_text="content__list_cities"
    )
    table = cities.locator("table")
    table.wait_for()
    assert "Lyon" in table.inner_text() and "Oslo" in table.inner_text()
    everything.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-content-04-every-type")

    hostile = page.locator(
        ".tool-card.status-completed", has_text="hostile__show_hostile"
    )
    refused = hostile.locator(".part-refused")
    assert refused.count() == 4  # three lying images, the huge file
    assert hostile.locator("img").count() == 0
    assert (
        "javascript:alert(document.cookie)"
        in hostile.locator(".part-link").inner_text()
    )
    assert hostile.locator("a[href^='javascript']").count() == 0
    assert "<img src=x onerror=alert(3)>" in hostile.locator(".part-link").inner_text()
    assert "files may be at most 2.0 MB" in hostile.inner_text()
    hostile.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-content-05-hostile")
    watch.check(page)
    assert page.console == []
