"""What a person does to a turn, seen in Chromium (issue 25): Stop asks first and stops every
running branch as "stopped" by that person, an undo is in the audit trail, revoking a token asks
first, and a fork's wall time counts from the fork's own start.
Screenshots: test-artifacts/actions-*.png (1280x800, and 1920x1080 with a -wide suffix).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    confirm_ready,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    start_notebook,
    step_cells,
    wait_until,
)
from live_support import FOUR_STEP_QUESTION, QUESTION, analyst_rules, four_step_rules

from runs.demo.research import RESEARCH_PROMPT, research_rules
from runs.engine.testing import Script, ScriptedServer, Timing

pytestmark = pytest.mark.browser


def shots(page: Any, artifacts_dir: Path, name: str) -> None:
    """The page at 1280x800 and at 1920x1080."""
    shot(page, artifacts_dir, name)
    size = page.viewport_size
    page.set_viewport_size({"width": 1920, "height": 1080})
    try:
        shot(page, artifacts_dir, f"{name}-wide")
    finally:
        page.set_viewport_size(size)


def slow_branches(ttft_s: float = 20.0) -> Script:
    """The research demo, its branches' answers slow enough to be seen running (and stopped)."""
    rules = research_rules()
    slow = Timing(ttft_s=ttft_s, token_delay_s=0.02)
    return Script(
        rules=[
            r.model_copy(update={"timing": slow})
            if r.name
            and r.name not in ("demo-research-split", "demo-research-synthesis")
            else r
            for r in rules
        ]
    )


def running_cells(page: Any) -> int:
    return int(
        page.evaluate(
            "() => document.querySelectorAll('article.cell-step[data-status=running]').length"
        )
    )


def test_stop_asks_first_then_stops_every_running_branch_as_stopped_by_the_person(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(slow_branches(), reset_log=True)
    task_id = start_notebook(
        page, live_app, RESEARCH_PROMPT, agent="parallel_research", mode="auto"
    )
    wait_until(lambda: running_cells(page) == 3, message="three branches running")
    wait_until(lambda: len(scripted_model.requests) == 4, message="their model calls")

    stop = page.get_by_role("button", name="Stop", exact=True)
    stop.click()
    dialog = page.get_by_role("dialog", name="Stop this turn?")
    dialog.wait_for()
    # focus starts on the harmless choice
    assert page.evaluate("() => document.activeElement.textContent") == "Keep going"
    shots(page, artifacts_dir, "actions-01-stop-asks-first")
    dialog.get_by_role("button", name="Keep going").click()
    dialog.wait_for(state="detached")
    assert running_cells(page) == 3, "Keep going stops nothing"

    stop.click()
    page.get_by_role("dialog", name="Stop this turn?").get_by_role(
        "button", name="Stop the turn"
    ).click()
    note = page.locator(".turn-stopped")
    note.wait_for()
    assert note.inner_text().startswith("Stopped by analyst during steps 2, 3 and 4"), (
        note.inner_text()
    )
    cells = step_cells(page)
    wait_until(lambda: cells.count() == 5, message="the five steps")
    badges = [cells.nth(i).locator(".badge.status").inner_text() for i in range(5)]
    assert badges == ["completed", "stopped", "stopped", "stopped", "not run: stopped"]
    for i in (1, 2, 3):
        branch = cells.nth(i)
        assert branch.get_attribute("data-status") == "interrupted"  # the amber state
        assert branch.locator(".step-error").count() == 0, "not shown as a failure"
        assert (
            "analyst stopped the turn" in branch.locator(".human-actions").inner_text()
        )
    assert "CancelledError" not in page.locator("#cells").inner_text()
    cells.nth(3).scroll_into_view_if_needed()
    shots(page, artifacts_dir, "actions-02-stopped-branches")

    # the trace and the traces list say the same
    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.wait_for_selector("#trace[data-ready='true']")
    assert (
        page.locator(".turn-stopped")
        .inner_text()
        .startswith("Stopped by analyst during steps 2, 3 and 4")
    )
    page.goto(f"{live_app.url}/traces/")
    row = page.locator(f"#trace-rows tr[data-task-id='{task_id}']")
    row.wait_for()
    assert (
        row.locator(".trace-outcome").inner_text()
        == "stopped by analyst at steps 2, 3, 4"
    )
    assert not page.console_errors, page.console_errors


def test_an_undo_is_listed_with_who_did_it_in_the_notebook_and_the_trace(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=analyst_rules()), reset_log=True)
    task_id = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="step"
    )
    first = step_cells(page).first
    first.get_by_role("button", name="Approve and run").click()
    first.get_by_role("button", name="Undo this step").click()
    first.get_by_role("button", name="Approve and run").wait_for()
    actions = first.locator(".human-actions li")
    wait_until(lambda: actions.count() == 2, message="approve and undo listed")
    assert [actions.nth(i).get_attribute("data-action") for i in range(2)] == [
        "approved",
        "undone",
    ]
    assert "analyst undid the step" in actions.nth(1).inner_text()
    shots(page, artifacts_dir, "actions-03-undo-in-the-audit")

    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.wait_for_selector("#trace[data-ready='true']")
    trail = page.locator("article.cell-step").first.locator(".human-actions")
    assert "analyst undid the step" in trail.inner_text()
    assert page.locator("[data-total='human-actions']").inner_text() == "2"
    assert not page.console_errors, page.console_errors


def test_revoking_a_token_asks_first(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    page.goto(f"{live_app.url}/settings/tokens/")
    page.get_by_label("Name").fill("nightly export")
    page.get_by_role("button", name="Create token").click()
    row = page.locator("tr", has_text="nightly export")
    confirm_ready(page, "form[data-revoke]")
    row.get_by_role("button", name="Revoke").click()
    dialog = page.get_by_role("dialog", name="Revoke the token “nightly export”?")
    dialog.wait_for()
    shots(page, artifacts_dir, "actions-04-revoke-asks-first")
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="detached")
    assert row.get_by_role("button", name="Revoke").is_visible(), "still active"
    page.keyboard.press("Escape")  # nothing open: nothing happens

    row.get_by_role("button", name="Revoke").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke token").click()
    page.wait_for_load_state()
    revoked = page.locator("tr", has_text="nightly export").locator(".badge")
    revoked.wait_for()
    assert revoked.inner_text().startswith("revoked")
    assert not page.console_errors, page.console_errors


def test_a_forks_wall_time_counts_from_its_own_start(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=four_step_rules()), reset_log=True)
    source = start_notebook(
        page, live_app, FOUR_STEP_QUESTION, agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer").wait_for()
    # the source ran ten minutes ago: its stored events (and their times) say so
    live_app.shell(
        "from runs.models import Event\n"
        f"for e in Event.objects.filter(task_id={source}):\n"
        "    e.at -= 600\n"
        "    for key in ('at', 'started_at', 'ended_at'):\n"
        "        if isinstance(e.payload.get(key), float): e.payload[key] -= 600\n"
        "    e.save()"
    )
    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    step_cells(page).nth(1).get_by_role("button", name="Fork here").click()
    page.wait_for_url(lambda url: "/tasks/" in url and f"/tasks/{source}/" not in url)
    page.wait_for_selector("#connection[data-state='open']")
    fork = int(page.url.rstrip("/").rsplit("/", 1)[1])
    for n in (2, 3):  # the fork waits at step 3, then step 4
        step_cells(page).nth(n).get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for()

    page.locator("[data-fork-origin]").get_by_role(
        "link", name="Compare with original"
    ).click()
    page.wait_for_selector("#compare[data-ready='true']")
    walls = page.locator("[data-totals] [data-total=wall-time]")
    # both ran for seconds: the fork's is not counted from the source's start, 10 min ago
    assert [walls.nth(i).inner_text() for i in range(2)] == [
        walls.nth(i).inner_text()
        for i in range(2)
        if "min" not in walls.nth(i).inner_text()
    ]
    shots(page, artifacts_dir, "actions-05-fork-wall-time")

    page.goto(f"{live_app.url}/traces/")
    row = page.locator(f"#trace-rows tr[data-task-id='{fork}']")
    row.wait_for()
    assert "min" not in row.locator("td[data-col='wall-time']").inner_text()
    assert not page.console_errors, page.console_errors


def test_parallel_branches_in_step_mode_are_approved_in_any_order_side_by_side(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(slow_branches(ttft_s=4.0), reset_log=True)
    start_notebook(
        page, live_app, RESEARCH_PROMPT, agent="parallel_research", mode="step"
    )
    cells = step_cells(page)
    cells.first.get_by_role("button", name="Approve and run").click()
    wait_until(lambda: cells.count() == 5, message="the branches and the synthesis")
    branches = [cells.nth(i) for i in (1, 2, 3)]
    for branch in branches:  # every branch waits with its own controls
        branch.get_by_role("button", name="Approve and run").wait_for()
    assert cells.nth(4).get_by_role("button", name="Approve and run").count() == 0
    shots(page, artifacts_dir, "actions-06-branches-each-waiting")

    # the last first; while it runs, the others can still be edited and approved
    branches[2].get_by_role("button", name="Approve and run").click()
    wait_until(lambda: running_cells(page) == 1, message="the third branch running")
    assert branches[0].get_by_label("Input for this step").is_enabled()
    edited = "Two baristas ask: What equipment and skill does cold brew need?"
    branches[0].get_by_label("Input for this step").fill(edited)
    branches[0].get_by_role("button", name="Approve and run").click()
    branches[1].get_by_role("button", name="Approve and run").click()
    wait_until(lambda: running_cells(page) == 3, message="three branches side by side")
    shots(page, artifacts_dir, "actions-07-branches-side-by-side")
    cells.nth(4).get_by_role("button", name="Approve and run").click(timeout=30_000)
    page.locator(".cell-answer").wait_for(timeout=30_000)
    asked = [r.last_user_text for r in scripted_model.requests[1:4]]
    assert edited in asked, asked
    assert len(scripted_model.requests) == 5, "each step ran once"
    assert not page.locator(".step-controls .control-error:not([hidden])").count()
    assert not page.console_errors, page.console_errors
