"""Review and audit in Chromium (issue 14): what a reviewer sees of long messages and limits.

Screenshots go to test-artifacts/review-*.png.
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
    start_notebook,
    step_cells,
)

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec
from runs.protocol import MAX_TEXT_CHARS

pytestmark = pytest.mark.browser


def long_message(chars: int) -> str:
    line = "Revenue per city, 2024, with the usual caveats about returns. "
    return (line * (chars // len(line) + 1))[:chars]


def test_the_length_limit_is_shown_nothing_is_cut_and_long_messages_fold(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(
        Script(rules=[Rule(reply=Reply(text="Noted."))]), reset_log=True
    )
    page.goto(f"{live_app.url}/new/")
    box = page.get_by_label("Message")
    counter = page.locator("#new-count")
    box.fill("A short question")
    assert counter.is_hidden(), "no counter far from the limit"

    over = long_message(MAX_TEXT_CHARS + 500)
    box.fill(over)
    assert box.input_value() == over, "the text box must not cut a paste"
    assert "500 characters too long" in counter.inner_text()
    assert box.get_attribute("aria-invalid") == "true"
    page.get_by_role("button", name="Start").click()
    page.wait_for_timeout(300)
    assert page.url.endswith("/new/"), "an over-long message is not sent"
    assert box.input_value() == over
    shot(page, artifacts_dir, "review-01-message-over-the-limit")

    fits = over[:MAX_TEXT_CHARS]
    box.fill(fits)
    assert counter.inner_text() == f"{MAX_TEXT_CHARS:,} / {MAX_TEXT_CHARS:,} characters"
    assert box.get_attribute("aria-invalid") is None
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/tasks/*/")
    page.locator(".cell-answer").wait_for()
    assert scripted_model.requests[-1].last_user_text == fits, (
        "the model got the whole message"
    )

    message = page.locator(".cell-message .message-text")
    assert message.text_content() == fits, "the whole text is in the page"
    assert "is-folded" in (message.get_attribute("class") or "")
    assert message.bounding_box()["height"] < 400, "a long message folds in its cell"
    toggle = page.locator(".cell-message .fold-toggle")
    assert toggle.inner_text() == f"Show all ({MAX_TEXT_CHARS:,} characters)"
    shot(page, artifacts_dir, "review-02-long-message-folded")
    toggle.click()
    assert message.bounding_box()["height"] > 1000
    assert toggle.get_attribute("aria-expanded") == "true"
    assert toggle.inner_text() == "Show less"
    toggle.click()
    assert message.bounding_box()["height"] < 400

    # The composer: the same counter, and a clear refusal that keeps the text.
    composer = page.get_by_role("textbox", name="Message")
    page.wait_for_function("() => !document.getElementById('composer-send').disabled")
    composer.fill(over)
    page.get_by_role("button", name="Send").click()
    page.wait_for_timeout(300)
    assert "500 characters too long" in page.locator("#composer-count").inner_text()
    assert composer.input_value() == over
    assert page.locator("section.turn").count() == 1, "nothing was sent"
    assert len(scripted_model.requests) == 1
    shot(page, artifacts_dir, "review-03-composer-over-the-limit")
    assert not page.console_errors, page.console_errors


def compute_rules() -> list[Rule]:
    calls = [
        ToolCallSpec(name="add", arguments={"a": 2, "b": 3}, id="call_add"),
        ToolCallSpec(name="multiply", arguments={"a": 4, "b": 5}, id="call_mul"),
    ]
    return [
        Rule(
            name="calls",
            match=Match(tool_results_since_user=0, has_tools=True),
            reply=Reply(text="Both at once.", tool_calls=calls),
        ),
        Rule(
            name="answer",
            match=Match(tool_results_since_user=2),
            reply=Reply(text="Done: 32."),
        ),
        Rule(name="chat", reply=Reply(text="Hello.")),
    ]


def test_an_edit_and_a_rejection_are_visible_in_the_trace_with_who_and_when(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compute_rules()), reset_log=True)
    task_id = start_notebook(
        page,
        live_app,
        "Compute (2 + 3) and (4 * 5)",
        agent="function_calling",
        mode="tools",
    )
    calls_step = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable"),
    )
    calls_step.wait_for()
    calls_step.get_by_label("Arguments for add (JSON)").fill('{"a": 2, "b": 30}')
    calls_step.get_by_role("button", name="Save edits").click()
    calls_step.locator(".human-action.action-edited_arguments").wait_for()
    mul = calls_step.locator(".tool-card", has_text="multiply")
    mul.get_by_label("Reason to reject").fill("not needed for this question")
    mul.get_by_role("button", name="Reject call").click()
    calls_step.locator(".human-action.action-rejected_call").wait_for()
    calls_step.get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for()
    live_step = step_cells(page).nth(1)
    assert (
        live_step.locator(".tool-card[data-tool-id='call_mul']")
        .get_attribute("class")
        .count("status-rejected")
        == 1
    )
    shot(page, artifacts_dir, "review-04-live-human-actions")

    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.wait_for_selector("#trace[data-ready='true']")
    step = page.locator("article.cell-step.has-human")
    assert step.count() == 1
    edit = step.locator(".human-action.action-edited_arguments")
    assert "analyst edited the arguments of add" in edit.inner_text()
    assert '"b": 3' in edit.locator(".edit-before").inner_text()
    assert '"b": 30' in edit.locator(".edit-after").inner_text()
    assert edit.locator(".when").inner_text(), "when it happened"
    reject = step.locator(".human-action.action-rejected_call")
    assert "analyst rejected multiply" in reject.inner_text()
    assert "not needed for this question" in reject.inner_text()
    assert (
        "analyst approved the step"
        in step.locator(".human-action.action-approved").inner_text()
    )
    card = step.locator(".tool-card[data-tool-id='call_mul']")
    assert "status-rejected" in (card.get_attribute("class") or "")
    assert "status-failed" not in (card.get_attribute("class") or "")
    assert "Rejected, not run" in card.inner_text() and "Error" not in card.inner_text()
    assert page.locator("[data-total='human-actions']").inner_text() == "3"
    shot(page, artifacts_dir, "review-05-trace-human-actions", full_page=True)

    page.get_by_label("Only steps with human actions").check()
    visible = page.locator("article.cell-step:visible")
    assert visible.count() == 1 and "has-human" in (
        visible.first.get_attribute("class") or ""
    )
    shot(page, artifacts_dir, "review-06-trace-only-human-actions")

    page.goto(f"{live_app.url}/traces/")
    row = page.locator(f"#trace-rows tr[data-task-id='{task_id}']")
    row.wait_for()
    assert row.locator(".trace-outcome").inner_text() == "answered"
    assert row.locator(".trace-answer").inner_text() == "Done: 32."
    assert row.locator("td[data-col='human-actions']").inner_text() == "3"
    assert row.locator("td[data-col='steps']").inner_text() == "3"
    assert not page.console_errors, page.console_errors


def test_a_stopped_turn_says_who_stopped_it_where_and_its_unrun_step_says_so(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compute_rules()), reset_log=True)
    task_id = start_notebook(
        page,
        live_app,
        "Compute (2 + 3) and (4 * 5)",
        agent="function_calling",
        mode="step",
    )
    first = step_cells(page).first
    first.get_by_role("button", name="Approve and run").click()
    second = step_cells(page).nth(1)
    page.wait_for_function(
        "() => document.querySelectorAll('article.cell-step')[1]?.classList.contains('is-waiting')"
    )
    page.get_by_role("button", name="Stop").click()
    page.get_by_role("dialog").get_by_role("button", name="Stop the turn").click()
    note = page.locator(".turn-stopped")
    note.wait_for()
    assert note.inner_text().startswith("Stopped by analyst at step 2, before it ran")
    assert second.locator(".badge.status").inner_text() == "not run: stopped"
    assert "Not run: the turn was stopped." in second.inner_text()
    assert "Waiting" not in second.inner_text()
    shot(page, artifacts_dir, "review-07-live-stopped-turn")

    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.wait_for_selector("#trace[data-ready='true']")
    assert (
        page.locator(".turn-stopped")
        .inner_text()
        .startswith("Stopped by analyst at step 2")
    )
    assert (
        page.locator("article.cell-step").nth(1).locator(".badge.status").inner_text()
        == "not run: stopped"
    )
    assert page.locator("[data-total='steps']").inner_text() == "1", (
        "the unrun step is not counted"
    )
    shot(page, artifacts_dir, "review-08-trace-stopped-turn", full_page=True)

    # The traces list tells this notebook apart: how its last turn ended, its size, who acted.
    page.goto(f"{live_app.url}/traces/")
    row = page.locator(f"#trace-rows tr[data-task-id='{task_id}']")
    row.wait_for()
    assert row.locator(".trace-outcome").inner_text() == "stopped by analyst at step 2"
    cells = {
        col: row.locator(f"td[data-col='{col}']").inner_text()
        for col in ("steps", "tool-calls", "tokens", "human-actions")
    }
    # The tokens column is the notebook's total as stored (it grows with the tools' schemas).
    export = page.request.get(f"{live_app.url}/api/tasks/{task_id}/trace.json").json()
    stored_tokens = export["usage"]["total_tokens"]
    assert stored_tokens > 0
    assert cells == {
        "steps": "1",
        "tool-calls": "2",
        "tokens": f"{stored_tokens:,}",
        "human-actions": "2",
    }
    assert row.locator("td[data-col='wall-time']").inner_text() != "—"
    shot(page, artifacts_dir, "review-09-traces-list-outcomes")
    assert not page.console_errors, page.console_errors


def test_annotations_on_a_step_a_call_and_the_answer_are_stored_shown_searchable_and_exported(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compute_rules()), reset_log=True)
    task_id = start_notebook(
        page,
        live_app,
        "Compute the totals for the audit",
        agent="function_calling",
        mode="auto",
    )
    page.locator(".cell-answer").wait_for()
    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.wait_for_selector("#trace[data-ready='true']")

    first = page.locator("article.cell-step").first
    add_card = first.locator(".tool-card[data-tool-id='call_add']")
    add_card.get_by_role("button", name="Annotate the add call").click()
    add_card.get_by_role("button", name="Thumbs up: the add call").click()
    add_card.locator(".annotation.rating-1").wait_for()

    first.get_by_role("button", name="Annotate this step").click()
    step_slot = first.locator(".annotations[data-target=step] .annotate")
    step_slot.get_by_label("Comment on this step").fill(
        "the model called both tools at once: zebra-check"
    )
    step_slot.get_by_role("button", name="Thumbs down: this step").click()
    first.locator(".annotations[data-target=step] .annotation.rating--1").wait_for()

    answer = page.locator(".cell-answer")
    answer.get_by_role("button", name="Annotate the answer").click()
    answer.get_by_role("button", name="Save comment: the answer").click()
    error = answer.locator(".control-error")
    error.wait_for()
    assert "Write a comment first" in error.inner_text(), (
        "an empty annotation is refused with the reason"
    )
    answer.get_by_label("Comment on the answer").fill("Correct total.")
    answer.get_by_role("button", name="Save comment: the answer").click()
    answer.locator(".annotation-comment", has_text="Correct total.").wait_for()
    shot(page, artifacts_dir, "review-10-annotations-added", full_page=True)

    page.reload()
    page.wait_for_selector("#trace[data-ready='true']")
    assert page.locator(".annotation").count() == 3, (
        "stored, shown again after a reload"
    )
    assert (
        "zebra-check"
        in page.locator("article.cell-step")
        .first.locator(".annotation.rating--1")
        .inner_text()
    )
    assert "analyst" in page.locator(".cell-answer .annotation").inner_text()

    exported = page.evaluate(
        f"async () => (await (await fetch('/api/tasks/{task_id}/trace.json')).json()).annotations"
    )
    assert sorted(
        (n["target"], n["rating"], n["comment"], n["by"]) for n in exported
    ) == [
        ("answer", 0, "Correct total.", "analyst"),
        ("call", 1, "", "analyst"),
        ("step", -1, "the model called both tools at once: zebra-check", "analyst"),
    ]
    assert {n["tool_id"] for n in exported if n["target"] == "call"} == {"call_add"}

    page.goto(f"{live_app.url}/traces/?q=zebra-check")
    page.locator(f"#trace-rows tr[data-task-id='{task_id}']").wait_for()
    assert page.locator("#trace-rows tr").count() == 1, "searchable in the traces list"
    shot(page, artifacts_dir, "review-11-annotation-search")
    assert not page.console_errors, page.console_errors
