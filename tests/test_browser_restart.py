"""The server restarts under an open tab (issue 16, item 6): the page recovers by itself.

A step is running when daphne is stopped and started again on the same port and database. The
tab reconnects on its own, sees the step interrupted (its lease belonged to the stopped
process) and can run it again at once; no action is refused with `already_running`.
A tab open across a crash mid tool call sees the step's model told, when run again, that the call
had begun. Screenshots: restart-*.png, crash-*.png.
"""

from __future__ import annotations

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
    shot,
    shots_at_both_sizes,
    start_notebook,
    step_cells,
)

from runs.demo.slow import SLOW_PROMPT, slow_rules
from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, Timing

pytestmark = pytest.mark.browser

STORY = "Tell me a long story"
THE_END = "And they all lived happily. The end."


def story_script() -> Script:
    """A slow story (once), then a short one: a run cut off and run again is told apart."""
    slow = Rule(
        name="slow",
        match=Match(last_user_contains=STORY),
        reply=Reply(text="Once upon a time " * 200),
        timing=Timing(token_delay_s=0.2),
        max_uses=1,
    )
    fast = Rule(
        name="fast", match=Match(last_user_contains=STORY), reply=Reply(text=THE_END)
    )
    return Script(rules=[slow, fast])


def test_a_tab_open_across_a_restart_recovers_by_itself(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(story_script(), reset_log=True)
    start_notebook(page, live_app, STORY, agent="function_calling", mode="step")
    step = step_cells(page).first
    approve = step.get_by_role("button", name="Approve and run")
    page.wait_for_function(
        "() => !document.querySelector('article.cell-step [data-action=approve]').disabled"
    )
    approve.click()
    page.locator(".stream-text").first.wait_for()
    shot(page, artifacts_dir, "restart-1-running")

    live_app.stop()  # SIGTERM, as a deploy or `systemctl restart` does
    # the stopped process's lease must not simply go stale meanwhile (30 s; a slow restart)
    live_app.env["AGENTUI_LEASE_STALE_S"] = "600"
    live_app.start()

    # the tab reconnects by itself and shows the step as interrupted, ready to run again
    page.wait_for_selector("#connection[data-state='open']", timeout=30_000)
    step.locator(".status-interrupted, [data-status='interrupted']").first.wait_for(
        timeout=15_000
    )
    page.wait_for_function(
        "() => !document.querySelector('article.cell-step [data-action=approve]').disabled",
        timeout=15_000,
    )
    shot(page, artifacts_dir, "restart-2-interrupted")
    step.get_by_role("button", name="Run again").click()
    page.locator(".cell-answer").wait_for(timeout=30_000)
    assert THE_END in page.locator(".cell-answer").inner_text()
    assert "already_running" not in page.content()
    shot(page, artifacts_dir, "restart-3-answered")
    assert len(scripted_model.requests) == 2


def test_a_tab_open_across_a_crash_sees_its_turn_taken_over_and_answered(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    """kill -9 mid-answer in `auto` mode: the server started again takes the turn over as the
    tab reconnects; the cut-off run shows as an interrupted attempt, the answer comes once."""
    scripted_model.load(story_script(), reset_log=True)
    start_notebook(page, live_app, STORY, agent="function_calling", mode="auto")
    page.locator(".stream-text").first.wait_for()
    shot(page, artifacts_dir, "crash-1-streaming")

    live_app.crash()
    live_app.env["AGENTUI_LEASE_STALE_S"] = (
        "600"  # taken over because its process is gone
    )
    live_app.start()

    page.locator(".cell-answer").wait_for(timeout=60_000)
    assert THE_END in page.locator(".cell-answer").inner_text()
    step = step_cells(page).first
    # the cut-off run is kept, as an earlier run of the step
    step.get_by_text("Earlier runs (1)").click()
    step.locator(".status-interrupted").first.wait_for()
    assert "already_running" not in page.content()
    shots_at_both_sizes(page, artifacts_dir, "crash-2-taken-over")
    assert [r.rule_name for r in scripted_model.requests] == ["slow", "fast"]


def test_a_crash_mid_tool_call_is_told_to_the_model_and_shown_when_run_again(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    """kill -9 while the demo's slow archive runs: the started server leaves the step
    interrupted (its model's reply was stored: running it by itself would repeat it), its card
    says the call may have happened, and Run again asks the model afresh, telling it that the
    archive had begun; the card shows that note word for word, as the model received it."""
    scripted_model.load(Script(rules=slow_rules(seconds=60)), reset_log=True)
    start_notebook(page, live_app, SLOW_PROMPT, agent="function_calling", mode="auto")
    card = page.locator(".tool-card").filter(has_text="archive_report")
    card.wait_for()  # its tool_call is stored: the tool is running

    live_app.crash()
    live_app.env["AGENTUI_LEASE_STALE_S"] = "600"  # dead because its process is gone
    live_app.start()

    page.wait_for_selector("#connection[data-state='open']", timeout=30_000)
    step = step_cells(page).first
    step.locator(".status-interrupted, [data-status='interrupted']").first.wait_for(
        timeout=15_000
    )
    assert "The server stopped while this call ran" in card.inner_text()
    page.wait_for_function(
        "() => !document.querySelector('article.cell-step [data-action=approve]').disabled",
        timeout=15_000,
    )
    assert len(scripted_model.requests) == 1  # not run again by itself
    step.get_by_role("button", name="Run again").click()

    told = step.locator(".told-of-stopped")
    told.wait_for(timeout=30_000)
    shown = told.locator(".told-of-stopped-text").inner_text()
    assert told.text_content().startswith("The model was told:")
    assert (
        "the server stopped while an earlier run was making these tool calls" in shown
    )
    assert (
        '"archive_report" with arguments {"title": "Quarterly sales", "seconds": 60}'
        in (shown)
    )
    # the answer streams after the note is drawn: wait for it (a read at once raced it)
    page.locator("#cells").get_by_text("I won't archive it again").first.wait_for()
    assert "I won't archive it again" in page.locator("#cells").inner_text()
    told.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "crash-3-told")
    assert [r.rule_name for r in scripted_model.requests] == [
        "demo-slow-archive",
        "demo-slow-told-of-stop",
    ]
    assert scripted_model.requests[1].messages[-1] == {
        "role": "system",
        "content": shown,
    }
    page.reload()  # read again from the stored events
    page.wait_for_selector("#connection[data-state='open']")
    assert told.locator(".told-of-stopped-text").inner_text() == shown
