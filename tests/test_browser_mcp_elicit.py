"""An MCP server's question to the person, answered in Chromium (tests/mcp_servers/asking.py).

The model calls the server's `book_room`; the server asks with a form (`ctx.elicit`); the
person gets a bad value refused (what they typed stays), answers, and the server's result
says what it got. Then `ask_hostile` asks with markup in its message and titles: shown as
text, and cancelled from a second tab, which the first tab shows at once.
The offline demo's example (the demo clock's `set_alarm`, runs/demo/mcp.py) runs from the start
page the same way. Screenshots: mcp-elicit-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

import re
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
from mcp_support import ASKING, add_stdio_server
from playwright.sync_api import expect

from runs.demo.mcp import ALARM_PROMPT, alarm_rules
from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

pytestmark = pytest.mark.browser

QUESTION = "Book me a room in Lisbon, then ask the odd question."


def rules() -> list[Rule]:
    asks = Match(last_user_contains=QUESTION)

    def after(results: int) -> Match:
        return asks.model_copy(update={"tool_results_since_user": results})

    return [
        Rule(
            name="book",
            match=after(0),
            reply=Reply(
                tool_calls=[
                    ToolCallSpec(
                        name="ask__book_room",
                        id="call_book",
                        arguments={"city": "Lisbon"},
                    )
                ]
            ),
        ),
        Rule(
            name="hostile",
            match=after(1),
            reply=Reply(
                tool_calls=[
                    ToolCallSpec(name="ask__ask_hostile", id="call_odd", arguments={})
                ]
            ),
        ),
        Rule(name="answer", match=after(2), reply=Reply(text="Booked, and asked.")),
    ]


def test_the_person_answers_an_mcp_servers_form_in_the_page(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=rules()), reset_log=True)
    said = add_stdio_server(live_app, "ask", [ASKING])
    assert "fetched 3 tools" in said, said
    page.goto(f"{live_app.url}/new/")
    page.get_by_label("Message").fill(QUESTION)
    page.get_by_label("Agent").select_option("function_calling")
    page.get_by_label("Approval").select_option("auto")
    page.locator("fieldset.mcp-tools input[value=ask__book_room]").check()
    page.locator("fieldset.mcp-tools input[value=ask__ask_hostile]").check()
    page.get_by_role("button", name="Start", exact=True).click()
    page.wait_for_url("**/tasks/*/")

    card = page.locator(".tool-card", has_text="ask__book_room")
    asked = card.locator("section.elicitation.is-open")
    asked.wait_for(timeout=60_000)
    assert "Booking a room in Lisbon: who stays, and how?" in asked.inner_text()
    assert "Waiting for your answer" in card.inner_text()
    # the status line says who waits for whom, not that the step is running
    expect(page.locator("#run-status")).to_have_text(
        re.compile(
            r"^Step \d+ waits for your answer to the MCP server ask's question\.$"
        )
    )
    assert asked.get_by_label("Nights").input_value() == "2"  # the server's default
    assert asked.get_by_label("Room").input_value() == "double"
    asked.get_by_label("Guest name (required)").fill("Ana")
    asked.get_by_label("Nights").fill("40")
    asked.get_by_role("button", name="Accept").click()
    refused = asked.locator("[data-error-slot^='elicit:']")
    refused.wait_for()
    assert "Nights: must be at most 14" in refused.inner_text()
    assert asked.get_by_label("Guest name (required)").input_value() == "Ana"  # kept
    asked.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-elicit-01-form-refused")

    asked.get_by_label("Nights").fill("3")
    asked.get_by_label("Breakfast").check()
    asked.get_by_label("Room").select_option("suite")
    asked.get_by_role("button", name="Accept").click()
    done = page.locator(".tool-card.status-completed", has_text="ask__book_room")
    done.wait_for(timeout=60_000)
    assert (
        "booked suite in Lisbon for Ana, 3 nights, breakfast yes" in done.inner_text()
    )
    outcome = done.locator(".elicit-outcome.elicit-accept")
    assert outcome.inner_text().startswith("Answered by ")
    assert '"nights": 3' in outcome.inner_text()
    assert done.locator("form.elicit-form").count() == 0  # no longer answerable

    odd = page.locator(".tool-card", has_text="ask__ask_hostile").locator(
        "section.elicitation.is-open"
    )
    odd.wait_for(timeout=60_000)
    assert "<img src=x onerror=" in odd.locator(".elicit-message").inner_text()
    assert "<script>" in odd.locator("label").first.inner_text()
    assert odd.locator("img, script").count() == 0
    shots_at_both_sizes(page, artifacts_dir, "mcp-elicit-02-hostile-open")

    # answered from another tab: this one shows it at once
    other = page.context.new_page()
    other.goto(page.url)
    other_form = other.locator(".tool-card", has_text="ask__ask_hostile").locator(
        "section.elicitation.is-open"
    )
    other_form.get_by_role("button", name="Cancel").click()
    page.locator(".cell-answer").wait_for(timeout=60_000)
    hostile_done = page.locator(
        ".tool-card.status-completed", has_text="ask__ask_hostile"
    )
    assert "hostile: cancel" in hostile_done.inner_text()
    assert (
        hostile_done.locator(".elicit-outcome.elicit-cancel")
        .inner_text()
        .startswith("Cancelled by ")
    )
    assert page.title() != "pwned"
    # answered everywhere: the status line no longer says the step waits for anyone
    expect(page.locator("#run-status")).not_to_contain_text("MCP server")
    audit = page.locator(
        ".human-actions", has_text="answered the MCP server's question"
    )
    assert audit.count() >= 1
    assert "Accepted and sent" in page.locator(".human-actions").first.inner_text()
    hostile_done.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-elicit-03-answered")
    told = [m for m in scripted_model.requests[-1].messages if m.get("role") == "tool"]
    assert [m["content"] for m in told] == [
        "booked suite in Lisbon for Ana, 3 nights, breakfast yes",
        "hostile: cancel",
    ]
    assert not page.console_errors, page.console_errors
    other.close()


def test_the_demo_example_needs_the_persons_answer_to_the_clock(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=alarm_rules()), reset_log=True)
    said = add_stdio_server(live_app, "clock", ["-m", "runs.demo.mcp_clock"])
    assert "fetched 3 tools" in said, said
    page.goto(f"{live_app.url}/")
    page.get_by_role("link", name=ALARM_PROMPT).click()
    page.wait_for_url("**/new/**")
    assert page.get_by_label("Message").input_value() == ALARM_PROMPT
    page.locator("fieldset.mcp-tools input[value=clock__set_alarm]").check()
    page.get_by_label("Approval").select_option("auto")
    page.get_by_role("button", name="Start", exact=True).click()
    page.wait_for_url("**/tasks/*/")

    form = page.locator(".tool-card", has_text="clock__set_alarm").locator(
        "section.elicitation.is-open"
    )
    form.wait_for(timeout=60_000)
    assert "When should the alarm in Asia/Tokyo ring" in form.inner_text()
    form.get_by_label("What for (required)").fill("standup")
    form.get_by_label("Minute").fill("15")
    form.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-elicit-04-demo-alarm")
    form.get_by_role("button", name="Accept").click()
    answer = page.locator(".cell-answer")
    answer.wait_for(timeout=60_000)
    assert "alarm set for 07:15 Asia/Tokyo, once: standup" in answer.inner_text()
    assert not page.console_errors, page.console_errors
