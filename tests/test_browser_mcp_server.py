"""agentui as an MCP server, decided in the page: another agent's `request_approval` over
`/mcp/` (the `mcp` SDK's client) shows live in the person's inbox with who asked, the person
approves it there, and the agent's call answers "approved"; a question with a form from its
JSON schema is answered in the inbox's form, and a wrong value is refused under it, keeping
what was typed. Nothing the agent wrote is markup. Screenshots: test-artifacts/mcp-server-*.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from axe_support import assert_accessible
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    scripted_model,
    shots_at_both_sizes,
)
from test_browser_hostile import watched

from tests.mcp_server_support import Background, request_row

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="window.__pwned=1"> Deploy <b>v2</b>'


@pytest.fixture
def app_env() -> dict[str, str]:
    return {}


def test_an_agents_approval_request_is_approved_in_the_inbox(
    live_app: LiveApp, new_context: Any, artifacts_dir: Path
) -> None:
    # every request the page makes is recorded: none may leave the origin, no CSP violation
    page, watch = watched(new_context, live_app)
    token = live_app.api_token("release-bot")
    page.goto(f"{live_app.url}/inbox/")
    page.locator("#inbox-empty:not([hidden])").wait_for()
    call = Background(
        live_app,
        token,
        "request_approval",
        {"description": HOSTILE, "arguments": {"service": "web", "version": "2.0"}},
    )
    item = page.locator(".inbox-request")
    item.wait_for()  # live: the page was not reloaded
    assert page.locator("[data-inbox-count]").inner_text() == "1"
    assert item.locator(".request-token").inner_text() == "release-bot"
    assert "python-httpx" in item.locator(".request-client").inner_text()
    # the agent's words are text: shown as written, never run or drawn
    assert item.locator(".request-description").inner_text() == HOSTILE
    assert item.locator("img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert '"version": "2.0"' in item.locator(".request-arguments").inner_text()
    assert "Times out automatically in" in item.locator(".deadline").inner_text()
    assert page.locator("#inbox-summary").inner_text() == (
        "1 request from an agent waits for you."
    )
    assert_accessible(page, "the inbox with an agent's request")
    shots_at_both_sizes(page, artifacts_dir, "mcp-server-approval")

    # a rejection needs a reason: refused in the page, nothing sent
    item.get_by_role("button", name="Reject").click()
    assert "Give a reason" in item.locator(".control-error").inner_text()
    assert call.thread.is_alive()

    item.get_by_role("button", name="Approve").click()
    answer = call.result()
    assert answer["data"]["status"] == "approved"
    assert answer["data"]["decided_by"] == "analyst"
    page.locator("#inbox-empty:not([hidden])").wait_for()
    assert page.locator("[data-inbox-count]").is_hidden()
    assert page.console == []
    watch.check(page)


def test_an_agents_question_is_answered_in_the_inbox_form(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    token = live_app.api_token("travel-bot")
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "title": "City"},
            "nights": {"type": "integer", "title": "Nights", "minimum": 1},
            "breakfast": {"type": "boolean", "title": "Breakfast"},
        },
        "required": ["city"],
    }
    page.goto(f"{live_app.url}/inbox/")
    call = Background(
        live_app, token, "ask_person", {"question": "Where to book?", "schema": schema}
    )
    item = page.locator(".inbox-request")
    item.wait_for()
    item.get_by_label("City (required)").fill("Oslo")
    item.get_by_label("Nights").fill("0")
    item.get_by_label("Breakfast").check()
    item.get_by_role("button", name="Send answer").click()
    error = item.locator(".control-error")
    error.wait_for()
    assert "Nights: must be at least 1" in error.inner_text()
    assert item.get_by_label("City (required)").input_value() == "Oslo"  # kept
    shots_at_both_sizes(page, artifacts_dir, "mcp-server-question")
    item.get_by_label("Nights").fill("2")
    item.get_by_role("button", name="Send answer").click()
    answer = call.result()
    assert answer["data"]["status"] == "answered"
    assert answer["data"]["answer"] == {"city": "Oslo", "nights": 2, "breakfast": True}
    row = request_row(live_app, answer["data"]["request_id"])
    assert row["decided_by_name"] == "analyst" and row["token_name"] == "travel-bot"
    assert page.console_errors == []
