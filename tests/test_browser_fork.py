"""Fork here, Compare and annotating from the live notebook, in Chromium (issue 14).

The fork's stored state is checked inside the live app (SQLite here; tests/test_fork.py checks
the same on PostgreSQL too). Screenshots go to test-artifacts/fork-*.png.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    USERNAME,
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
from live_support import FOUR_STEP_QUESTION, four_step_rules

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

pytestmark = pytest.mark.browser

EDITED = "Instead add the 99 returns."


def fork_script() -> Script:
    """The four-step notebook; a step 3 edited to ask for the 99 returns goes another way."""
    edited = [
        Rule(
            name="edited step 3",
            match=Match(last_user_contains="99 returns", tool_results_since_user=0),
            reply=Reply(
                text="Adding the 99 returns instead.",
                tool_calls=[
                    ToolCallSpec(
                        name="add", arguments={"a": 4050, "b": 99}, id="call_99"
                    )
                ],
            ),
        ),
        Rule(
            name="edited answer",
            match=Match(last_user_contains="99 returns", tool_results_since_user=1),
            reply=Reply(text="It is 4149."),
        ),
    ]
    return Script(rules=[*edited, *four_step_rules()])


def finished_notebook(page: Any, app: LiveApp) -> int:
    task = start_notebook(
        page, app, FOUR_STEP_QUESTION, agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer").wait_for()
    assert step_cells(page).count() == 4
    return task


def stored_differences(app: LiveApp, source: int, fork: int, steps: int) -> list[str]:
    out = app.shell(
        "import json; from fork_checks import differences_up_to; "
        f"print(json.dumps(differences_up_to({source}, {fork}, {steps})))"
    )
    return list(json.loads(out.strip().splitlines()[-1]))


def test_fork_at_step_2_edit_go_on_and_compare(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(fork_script(), reset_log=True)
    source = finished_notebook(page, live_app)
    step_2 = step_cells(page).nth(1)
    assert step_cells(page).nth(0).get_by_role("button", name="Fork here").is_visible()
    shot(page, artifacts_dir, "fork-01-source-finished", full_page=True)

    step_2.get_by_role("button", name="Fork here").click()
    page.wait_for_url(lambda url: "/tasks/" in url and f"/tasks/{source}/" not in url)
    page.wait_for_selector("#connection[data-state='open']")
    fork = int(page.url.rstrip("/").rsplit("/", 1)[1])
    origin = page.locator("[data-fork-origin]")
    assert "at turn 1, step 2" in origin.inner_text()
    assert (
        origin.get_by_role("link", name=f"{FOUR_STEP_QUESTION}").get_attribute("href")
        == f"/tasks/{source}/"
    )
    cells = step_cells(page)
    cells.nth(2).get_by_label("Input for this step").wait_for()
    assert cells.count() == 3
    assert [cells.nth(i).get_attribute("data-status") for i in range(3)] == [
        "completed",
        "completed",
        "pending",
    ]
    assert "First the total." in cells.nth(0).inner_text()
    assert "Now double it." in cells.nth(1).inner_text()
    assert stored_differences(live_app, source, fork, 2) == []
    shot(page, artifacts_dir, "fork-02-forked-at-step-2", full_page=True)

    # Edit the waiting step and go on: the fork goes its own way from step 3.
    field = cells.nth(2).get_by_label("Input for this step")
    page.wait_for_function(
        "() => !document.querySelector('article.cell-step [data-action=approve]').disabled"
    )
    field.fill(EDITED)
    field.press("Control+Enter")
    approve = cells.nth(3).get_by_role("button", name="Approve and run")
    approve.wait_for()
    page.wait_for_function(
        "() => ![...document.querySelectorAll('article.cell-step [data-action=approve]')].at(-1).disabled"
    )
    approve.click()
    page.locator(".cell-answer").wait_for()
    assert "It is 4149." in page.locator(".cell-answer").inner_text()
    assert stored_differences(live_app, source, fork, 2) == [], (
        "steps 1 and 2 stay the source's"
    )
    assert stored_differences(live_app, source, fork, 3) != [], (
        "from step 3 on, the fork differs"
    )
    shot(page, artifacts_dir, "fork-03-fork-went-on", full_page=True)

    # Compare with the original: steps 1-2 the same, 3-4 and the answer marked as different.
    origin.get_by_role("link", name="Compare with original").click()
    page.wait_for_selector("#compare[data-ready='true']")
    assert page.locator("#compare-summary").inner_text() == (
        "2 of 4 aligned steps differ; the first is turn 1, step 3."
    )
    rows = page.locator(".compare-step")
    assert [rows.nth(i).get_attribute("data-differs") for i in range(4)] == [
        "false",
        "false",
        "true",
        "true",
    ]
    step_3 = rows.nth(2)
    assert step_3.locator("[data-field=input].is-different").count() == 2
    assert (
        "Instead add the 99 returns."
        in step_3.locator(".compare-cell").nth(1).inner_text()
    )
    assert step_3.locator(".compare-args.is-different").count() == 2
    # the call's arguments as a table of name and value, not its JSON
    changed = step_3.locator(".compare-cell").nth(1).locator(".compare-args")
    assert changed.locator(".tool-name").inner_text() == "add"
    assert changed.locator(".compare-arg-table tr").all_inner_texts() == [
        "a\t4050",
        "b\t99",
    ]
    assert page.locator(".compare-answer[data-differs=true]").count() == 1
    totals = page.locator("[data-totals]")
    assert [
        totals.nth(i).locator("[data-total=steps]").inner_text() for i in range(2)
    ] == ["4", "4"]
    assert [
        totals.nth(i).locator("[data-total=tool-calls]").inner_text() for i in range(2)
    ] == ["3", "3"]
    # the scripted model has no price: its cost is unknown, never shown as $0
    assert [
        totals.nth(i).locator("[data-total=cost]").inner_text() for i in range(2)
    ] == ["price unknown", "price unknown"]
    shot(page, artifacts_dir, "fork-04-compare", full_page=True)
    shots_at_both_sizes(page, artifacts_dir, "fork-04-compare")
    # what the page drew is what a script reads from the REST API (the same function)
    drawn = page.evaluate("() => window.agentui.comparison")
    rest = page.request.get(f"{live_app.url}/api/v1/compare?a={source}&b={fork}")
    assert rest.status == 200
    assert rest.json() == drawn
    page.get_by_label("Only steps that differ").check()
    assert rows.nth(0).is_hidden() and rows.nth(2).is_visible()
    shot(page, artifacts_dir, "fork-05-compare-only-different")

    # The traces list says where the fork came from, and picks any two to compare.
    page.goto(f"{live_app.url}/traces/")
    fork_row = page.locator(f"tr[data-task-id='{fork}']")
    assert "fork of" in fork_row.locator(".trace-fork").inner_text()
    assert "at turn 1, step 2" in fork_row.inner_text()
    button = page.locator("#compare-picked")
    assert button.is_disabled()
    fork_row.get_by_role("checkbox").check()
    page.locator(f"tr[data-task-id='{source}']").get_by_role("checkbox").check()
    assert button.is_enabled()
    shot(page, artifacts_dir, "fork-06-traces-list-pick-two")
    button.click()
    page.wait_for_selector("#compare[data-ready='true']")
    assert f"a={fork}&b={source}" in page.url
    assert page.console_errors == [], page.console_errors


def test_fork_refusals_are_clear(live_app: LiveApp, page: Any) -> None:
    page.goto(f"{live_app.url}/traces/")
    answer = page.request.post(
        f"{live_app.url}/api/tasks/999999/fork/",
        data=json.dumps({"step_id": "x"}),
        headers={"Content-Type": "application/json", "X-CSRFToken": _csrf(page)},
    )
    assert answer.status == 404
    # a notebook of its own as `a` (notebook 1 exists only when an earlier test made it)
    own = live_app.seed("seed_long_trace", USERNAME, 2)
    page.goto(f"{live_app.url}/traces/compare/?a={own}")
    assert "give two notebooks to compare" in page.locator(".notice").inner_text()


def _csrf(page: Any) -> str:
    return str(page.locator("input[name=csrfmiddlewaretoken]").first.input_value())


def test_annotations_from_the_notebook_page_round_trip_through_the_export(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=four_step_rules()), reset_log=True)
    task = finished_notebook(page, live_app)
    step_1 = step_cells(page).first
    step_1.get_by_role("button", name="Annotate this step").click()
    step_1.get_by_label("Comment on this step").fill("Good first move")
    step_1.get_by_role("button", name="Thumbs up: this step").click()
    step_1.locator(".annotation").wait_for()
    card = step_1.locator(".tool-card").first
    card.get_by_role("button", name="Annotate the add call").click()
    card.get_by_label("Comment on the add call").fill("Wrong year?")
    card.get_by_role("button", name="Thumbs down: the add call").click()
    card.locator(".annotation").wait_for()
    answer = page.locator(".cell-answer")
    answer.get_by_role("button", name="Annotate the answer").click()
    answer.get_by_label("Comment on the answer").fill("Checked against the ledger")
    answer.get_by_role("button", name="Save comment: the answer").click()
    answer.locator(".annotation").wait_for()
    shot(page, artifacts_dir, "fork-07-annotated-in-notebook", full_page=True)

    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    page.locator(".cell-answer .annotation").wait_for()
    assert (
        "Good first move"
        in step_cells(page).first.locator(".annotations[data-target=step]").inner_text()
    )
    assert (
        "Wrong year?"
        in step_cells(page).first.locator(".tool-card .annotations").inner_text()
    )

    export = page.request.get(f"{live_app.url}/api/tasks/{task}/trace.json").json()
    first_step = export["turns"][0]["steps"][0]["step_id"]
    notes = {(n["target"], n["rating"], n["comment"]): n for n in export["annotations"]}
    assert set(notes) == {
        ("step", 1, "Good first move"),
        ("call", -1, "Wrong year?"),
        ("answer", 0, "Checked against the ledger"),
    }
    assert notes[("step", 1, "Good first move")]["step_id"] == first_step
    assert notes[("call", -1, "Wrong year?")]["tool_id"] == "call_0"
    assert (
        notes[("answer", 0, "Checked against the ledger")]["turn_id"]
        == export["turns"][0]["id"]
    )
    # the same notes in the trace view
    page.goto(f"{live_app.url}/traces/{task}/")
    page.wait_for_selector("#trace[data-ready='true']")
    assert page.locator(".annotation").count() == 3
    assert page.console_errors == [], page.console_errors
