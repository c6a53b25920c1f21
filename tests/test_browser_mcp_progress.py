"""An MCP server's progress and log messages on a call's card, in Chromium.

The model calls the tests' server's `slow` (tests/mcp_servers/app.py `progress`): its card's
progress bar advances live while the call runs, the server's message beside it as text, then
the result; `chatter` sends log messages (one hostile) that show collapsed under its card, at
the admin's level and above, as text. A reload and the trace page show the last progress and
the messages. The offline demo's example (the demo clock's `sync_clock`) shows its progress
the same way. The server is configured in the admin with an idle timeout shorter than the call.
Screenshots: mcp-progress-*.png at 1280x800 and 1920x1080."""

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
from mcp_support import APP, add_stdio_server
from playwright.sync_api import expect
from test_browser_mcp import add_server

from runs.demo.mcp import SYNC_PROMPT, sync_rules
from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

pytestmark = pytest.mark.browser

QUESTION = "Do the long work, then let the server talk."
STEPS = 30


def rules() -> list[Rule]:
    asks = Match(last_user_contains=QUESTION)

    def after(results: int) -> Match:
        return asks.model_copy(update={"tool_results_since_user": results})

    slow = ToolCallSpec(
        name="long__slow", id="call_slow", arguments={"steps": STEPS, "every_ms": 100}
    )
    chatter = ToolCallSpec(name="long__chatter", id="call_chat", arguments={})
    return [
        Rule(name="slow", match=after(0), reply=Reply(tool_calls=[slow])),
        Rule(name="chatter", match=after(1), reply=Reply(tool_calls=[chatter])),
        Rule(name="answer", match=after(2), reply=Reply(text="All done.")),
    ]


def live_value(page: Any) -> float:
    """The progress the live bar of the slow call shows now (-1: none live)."""
    return float(
        page.evaluate(
            """() => {
              const bar = [...document.querySelectorAll('.tool-card')]
                .find((c) => c.textContent.includes('long__slow'))
                ?.querySelector('.tool-progress.is-live');
              return bar ? Number(bar.dataset.progress) : -1;
            }"""
        )
    )


def test_the_progress_bar_advances_live_then_the_result_shows(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=rules()), reset_log=True)
    # the admin sets the server's limits and log level: progress every 100 ms keeps a call
    # of 3 s going past an idle timeout of 1 s
    limits = {
        "id_idle_timeout_s": "1",
        "id_max_call_s": "60",
        "id_log_level": "warning",
    }
    said = add_server(page, live_app, "long", "progress", APP, fields=limits)
    assert said.startswith("MCP server long: fetched 4 tools"), said
    page.goto(f"{live_app.url}/new/")
    page.get_by_label("Message").fill(QUESTION)
    page.get_by_label("Agent").select_option("function_calling")
    page.get_by_label("Approval").select_option("auto")
    page.locator("fieldset.mcp-tools input[value=long__slow]").check()
    page.locator("fieldset.mcp-tools input[value=long__chatter]").check()
    page.get_by_role("button", name="Start", exact=True).click()
    page.wait_for_url("**/tasks/*/")

    card = page.locator(".tool-card", has_text="long__slow")
    live = card.locator(".tool-progress.is-live")
    live.wait_for(timeout=60_000)
    first = live_value(page)
    assert 0 < first < STEPS
    # it moves on while the call still runs (no result on the card yet)
    page.wait_for_function(
        """(first) => {
          const card = [...document.querySelectorAll('.tool-card')]
            .find((c) => c.textContent.includes('long__slow'));
          const bar = card?.querySelector('.tool-progress.is-live');
          return bar && Number(bar.dataset.progress) > first;
        }""",
        arg=first,
        timeout=30_000,
    )
    later = live_value(page)
    assert first < later < STEPS, (first, later)
    bar = live.locator("progress")
    assert bar.get_attribute("max") == str(STEPS)
    assert 0 < float(bar.evaluate("b => b.value")) < STEPS
    text = live.locator(".progress-text").inner_text()
    assert re.search(rf"\d+ of {STEPS} \(\d+%\)", text), text
    # the server's markup is text on the card
    assert "<b>done</b>" in text and live.locator("b").count() == 0
    assert "Running…" in card.inner_text()
    card.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-progress-01-live")

    done = page.locator(".tool-card.status-completed", has_text="long__slow")
    done.wait_for(timeout=60_000)
    assert f"done after {STEPS} steps" in done.inner_text()
    last = done.locator(".tool-progress")
    expect(last).not_to_have_class(re.compile(r"is-live"))
    assert last.locator(".field-label").text_content() == "Last progress"
    assert f"{STEPS} of {STEPS} (100%)" in last.inner_text()
    logs = done.locator("details.tool-logs")
    assert logs.get_attribute("open") is None  # collapsed
    assert logs.locator("summary").inner_text() == "Server log: 2 messages"

    chat = page.locator(".tool-card.status-completed", has_text="long__chatter")
    chat.wait_for(timeout=60_000)
    page.locator(".cell-answer").wait_for(timeout=60_000)
    told = chat.locator("details.tool-logs")
    assert told.locator("summary").inner_text() == "Server log: 7 messages"
    told.locator("summary").click()
    items = told.locator("li.tool-log")
    assert items.count() == 7
    levels = [items.nth(i).locator(".log-level").inner_text() for i in range(7)]
    assert levels == [
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
        "error",
        "error",
    ]
    hostile = items.nth(5)
    assert "<img src=x onerror=" in hostile.locator(".log-text").inner_text()
    assert hostile.locator(".log-logger").inner_text() == "<i>hostile</i>"
    assert told.locator("img, b, i").count() == 0
    assert page.title() != "pwned"
    told.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "mcp-progress-02-done")

    # a reload draws the stored progress and messages; the list stays as the person left it
    page.reload()
    again = page.locator(".tool-card.status-completed", has_text="long__slow")
    again.wait_for(timeout=30_000)
    assert f"{STEPS} of {STEPS} (100%)" in again.locator(".tool-progress").inner_text()
    assert (
        page.locator(".tool-card", has_text="long__chatter")
        .locator("details.tool-logs summary")
        .inner_text()
        == "Server log: 7 messages"
    )
    task_id = re.search(r"/tasks/(\d+)/", page.url).group(1)  # type: ignore[union-attr]
    page.goto(f"{live_app.url}/traces/{task_id}/")
    traced = page.locator(".tool-card", has_text="long__slow")
    traced.wait_for(timeout=30_000)
    assert f"{STEPS} of {STEPS} (100%)" in traced.locator(".tool-progress").inner_text()
    assert not page.console_errors, page.console_errors


def test_the_demo_example_shows_the_clocks_progress(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=sync_rules()), reset_log=True)
    said = add_stdio_server(live_app, "clock", ["-m", "runs.demo.mcp_clock"])
    assert "fetched 3 tools" in said, said
    page.goto(f"{live_app.url}/")
    page.get_by_role("link", name=SYNC_PROMPT).click()
    page.wait_for_url("**/new/**")
    page.locator("fieldset.mcp-tools input[value=clock__sync_clock]").check()
    page.get_by_label("Approval").select_option("auto")
    page.get_by_role("button", name="Start", exact=True).click()
    page.wait_for_url("**/tasks/*/")
    card = page.locator(".tool-card", has_text="clock__sync_clock")
    live = card.locator(".tool-progress.is-live")
    live.wait_for(timeout=60_000)
    # read while it is live (textContent, retried): the bar is redrawn at every note, and a
    # loaded machine may reach the call's end between two looks
    expect(live).to_contain_text("samples with the reference")
    # scrolled in one script: the card too is redrawn at every note, so a located element
    # may be gone by the time a separate scroll reaches it
    page.evaluate(
        """() => [...document.querySelectorAll('.tool-card')]
            .find((c) => c.textContent.includes('clock__sync_clock'))
            ?.scrollIntoView({ block: 'center' })"""
    )
    shots_at_both_sizes(page, artifacts_dir, "mcp-progress-03-demo-live")
    answer = page.locator(".cell-answer")
    answer.wait_for(timeout=60_000)
    assert "the clock is in sync: 60 samples compared" in answer.inner_text()
    done = page.locator(".tool-card.status-completed", has_text="clock__sync_clock")
    assert "10 of 10 (100%)" in done.locator(".tool-progress").inner_text()
    assert done.locator("details.tool-logs summary").inner_text() == (
        "Server log: 1 message"
    )
    assert not page.console_errors, page.console_errors
