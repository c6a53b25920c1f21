"""Deleting a notebook in Chromium: the Delete action asks in a dialog naming the notebook
(keyboard only: Escape says no, Tab and Enter say yes), then the list of notebooks says it was
deleted; a second tab open on the notebook is told at once who deleted it, and its page after
a reload says so too (410). Screenshots: delete-*.png at 1280x800 (and 1920x1080)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from axe_support import assert_accessible
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    confirm_ready,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    shots_at_both_sizes,
    start_notebook,
    watch_errors,
)

from runs.engine.testing import ScriptedServer
from tests.live_support import QUESTION, analyst_script

pytestmark = pytest.mark.browser


def test_delete_with_confirmation_and_the_other_tab_is_told(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    # tools mode: the run waits for an approval (the state a reviewer would see it in)
    pk = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="tools"
    )
    page.wait_for_selector("#run-status:has-text('Waiting')")
    title = page.locator("#notebook-title").inner_text()

    other = new_context().new_page()
    other_errors = watch_errors(other)
    other.goto(f"{live_app.url}/tasks/{pk}/")
    other.wait_for_selector("#connection[data-state='open']")
    assert other.locator("#notebook-deleted").is_hidden()

    # by keyboard: the Delete button, its dialog names the notebook, Escape says no
    confirm_ready(page, "form[data-delete-notebook]")
    page.locator("#delete-button").focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    assert dialog.get_by_role("heading").inner_text() == f"Delete “{title}”?"
    assert page.evaluate("document.activeElement.textContent") == "Cancel"
    shots_at_both_sizes(page, artifacts_dir, "delete-confirm")
    assert_accessible(page, "the delete dialog")
    page.keyboard.press("Escape")
    assert dialog.count() == 0
    assert page.url.endswith(f"/tasks/{pk}/")
    assert other.locator("#notebook-deleted").is_hidden()

    # again, and yes: Tab to "Delete notebook", Enter
    page.keyboard.press("Enter")  # the focus went back to the Delete button
    page.get_by_role("dialog").wait_for()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Delete notebook"
    page.keyboard.press("Enter")
    page.wait_for_url("**/traces/")
    assert f"Notebook “{title}” deleted." in page.locator(".messages").inner_text()
    shot(page, artifacts_dir, "delete-list-1280x800")

    # the other tab was told, by whom; its controls are locked
    banner = other.locator("#notebook-deleted")
    banner.wait_for(state="visible")
    assert "was deleted by" in banner.inner_text() and title in banner.inner_text()
    assert other.locator("#notebook").evaluate("el => el.inert")
    assert other.locator("#connection").get_attribute("data-state") == "fatal"
    # said once in the toolbar, and nothing says it will reconnect
    toolbar = other.locator(".nb-toolbar").inner_text()
    assert toolbar.count("This notebook was deleted.") == 1, toolbar
    assert "reconnecting" not in other.locator("#notebook").inner_text()
    assert other.evaluate("document.activeElement.textContent") == (
        "Go to your notebooks"
    )
    shots_at_both_sizes(other, artifacts_dir, "delete-other-tab")
    assert_accessible(other, "a tab told its notebook was deleted")
    assert other_errors == [] and page.console_errors == []

    # a reload (or a link) to it: a page saying it was deleted, not "not found"
    response = other.goto(f"{live_app.url}/tasks/{pk}/")
    assert response is not None and response.status == 410
    assert "This notebook was deleted" in other.locator("h1").inner_text()
    assert title in other.locator("main").inner_text()
    shot(other, artifacts_dir, "delete-gone-page-1280x800")
    assert_accessible(other, "the deleted notebook's page")
    other.get_by_role("link", name="Go to your notebooks").click()
    other.wait_for_url("**/traces/")


def test_delete_from_the_list_of_notebooks(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(analyst_script(), reset_log=True)
    pk = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="tools"
    )
    title = page.locator("#notebook-title").inner_text()
    page.goto(f"{live_app.url}/traces/")
    row = page.locator(f"tr[data-task-id='{pk}']")
    button = row.get_by_role("button", name=f"Delete “{title}”")
    button.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    assert dialog.get_by_role("heading").inner_text() == f"Delete “{title}”?"
    shot(page, artifacts_dir, "delete-from-list-1280x800")
    # a title with a hidden control (pasted into the first message) is named with its marker
    named = page.evaluate(
        """async () => {
            const { deleteQuestion } = await import("/static/js/delete_notebook.js");
            const { title } = deleteQuestion("Q3 \u202e4202\u202c");
            return title.map((n) => (typeof n === "string" ? n : n.textContent)).join("");
        }"""
    )
    assert named == "Delete “Q3 [U+202E]4202[U+202C]”?", named
    dialog.get_by_role("button", name="Cancel").click()
    assert row.count() == 1 and dialog.count() == 0
    button.click()
    page.get_by_role("dialog").get_by_role("button", name="Delete notebook").click()
    page.wait_for_url("**/traces/")
    assert f"Notebook “{title}” deleted." in page.locator(".messages").inner_text()
    page.locator("#trace-count").filter(has_text="notebooks").wait_for()
    assert page.locator(f"tr[data-task-id='{pk}']").count() == 0
    assert page.console_errors == []
