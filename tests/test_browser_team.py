"""The Team preset in Chromium: agent colours, a question answered from another tab after a
server restart, handoff edges with their reasons, the shared state, and undoing a handoff.

Screenshots: test-artifacts/team-*.png.
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
    step_cells,
    wait_until,
    watch_errors,
)

from runs.demo.team import QUESTION, TEAM_PROMPT, team_rules
from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser


def _agent_classes(page: Any) -> dict[str, str]:
    """Agent name -> colour class, read from the step cells' agent badges."""
    found: dict[str, str] = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('article.cell-step .badge.agent:not([hidden])')]
            .map(b => [b.textContent, [...b.classList].find(c => c.startsWith('agent-color-'))]))"""
    )
    return found


# longer than pytest.ini's default: a whole Team run, a server restart and a second tab
@pytest.mark.timeout(600)
def test_team_question_restart_other_tab_handoffs_state_and_undo(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(Script(rules=team_rules()), reset_log=True)

    # the start page offers the team example; it opens the new-notebook form filled in
    page.goto(f"{live_app.url}/")
    example = page.get_by_role("link", name=TEAM_PROMPT)
    example.wait_for()
    shot(page, artifacts_dir, "team-00-start-page")
    example.click()
    page.get_by_label("Approval").select_option("auto")
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/tasks/*/")
    notebook_url = page.url

    question = page.locator(".team-question .question-text")
    question.wait_for()
    assert question.text_content() == QUESTION
    page.get_by_role("button", name="Send answer").wait_for()
    assert page.locator("#team-status [data-current-agent]").text_content() == "planner"
    shot(page, artifacts_dir, "team-01-question-waits")

    # the server restarts while the question waits; nothing of the run is in memory any more
    live_app.stop()
    live_app.start()

    # another tab answers
    other = new_context().new_page()
    watch_errors(other)
    other.goto(notebook_url)
    other.wait_for_selector("#connection[data-state='open']")
    other.get_by_label("Your answer").fill("Europe")
    other.get_by_role("button", name="Send answer").click()
    answer = other.locator(".cell-answer .answer-text")
    answer.wait_for(timeout=30_000)
    assert "grew most" in (answer.text_content() or "")
    other.locator(".team-question").scroll_into_view_if_needed()
    other.wait_for_timeout(300)
    shot(other, artifacts_dir, "team-02-answered-in-another-tab")

    # the first tab reconnects and sees the same run
    page.locator(".cell-answer .answer-text").wait_for(timeout=30_000)
    colours = _agent_classes(page)
    assert set(colours) == {"planner", "analyst", "reviewer"}
    assert len(set(colours.values())) == 3, colours
    dag_colours = page.evaluate(
        "() => [...document.querySelectorAll('#dag .dag-node.kind-step')].map(g => g.getAttribute('class'))"
    )
    assert any(colours["analyst"] in c for c in dag_colours)
    labels = page.evaluate(
        "() => [...document.querySelectorAll('#dag .dag-edge-label')].map(t => t.textContent)"
    )
    assert any(label.startswith("→ analyst: the plan is set") for label in labels), (
        labels
    )
    assert any(label.startswith("→ reviewer: please check") for label in labels), labels
    assert (
        page.locator("#team-status [data-current-agent]").text_content() == "reviewer"
    )
    page.locator("#team-status summary").click()
    state_text = page.locator("#team-status [data-shared-state]").text_content() or ""
    assert "Europe region" in state_text and "grew most" in state_text
    assert page.locator(".handoff-note").count() == 2
    assert page.locator(".state-changes").count() == 2
    page.locator(".handoff-note").last.scroll_into_view_if_needed()
    page.wait_for_timeout(
        300
    )  # cells off screen skip painting (content-visibility) until shown
    shot(page, artifacts_dir, "team-03-finished-handoff-and-state")

    # undo back over the analyst's handoff: control returns to the analyst
    for expected in ("reviewer", "reviewer", "analyst"):
        before = page.locator("article.cell-step[data-status='completed']").count()
        page.get_by_role("button", name="Undo this step").click()
        page.wait_for_function(
            f"() => document.querySelectorAll(\"article.cell-step[data-status='completed']\").length < {before}"
        )
        wait_until(
            lambda want=expected: (
                page.locator("#team-status [data-current-agent]").text_content() == want
            ),
            message=f"current agent {expected}",
        )
    assert page.locator(".handoff-note").count() == 1
    page.locator("article.cell-step.is-waiting").scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    shot(page, artifacts_dir, "team-04-handoff-undone")
    # the trace names each step's agent and shows the handoffs
    page.goto(f"{live_app.url}/traces/{notebook_url.rstrip('/').rsplit('/', 1)[1]}/")
    page.locator(".handoff-note").first.wait_for()
    badges = page.evaluate(
        "() => [...document.querySelectorAll('article.cell-step .badge.agent:not([hidden])')].map(b => b.textContent)"
    )
    assert {"planner", "analyst"} <= set(
        badges
    )  # the reviewer's steps were undone away
    page.locator(".handoff-note").first.scroll_into_view_if_needed()
    page.wait_for_timeout(
        300
    )  # cells off screen skip painting (content-visibility) until shown
    shot(page, artifacts_dir, "team-05-trace")

    # the first tab's socket was refused while the server was down; anything else is a bug
    errors = [e for e in page.console_errors if "ERR_CONNECTION_REFUSED" not in e]
    assert not errors, errors
    assert not other.console_errors, other.console_errors
