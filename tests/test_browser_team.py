"""The Team preset in Chromium: agent colours, a question answered from another tab after a
server restart, handoff edges with their reasons, the shared state, and undoing a handoff; an
answered question no longer waits (issue 25, item 4): the asking call's card and its DAG node
say "answered" (it ran again with the answer in the question step), live, after a reload and in
the trace, and over REST every question has its answer, bound by waiter and call.

Screenshots: test-artifacts/team-*.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
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
    start_notebook,
    step_cells,
    wait_until,
    watch_errors,
)
from dag_helpers import dag_edges, dag_nodes, dag_shots

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
    # answered after the restart: the asking call no longer waits, on the card or in the DAG
    assert other.locator(".tool-card.status-waiting").count() == 0
    assert not [n for n in dag_nodes(other).values() if "status-waiting" in n["cls"]]
    assert other.locator(".tool-card.status-answered").count() == 1
    other.locator(".team-question").scroll_into_view_if_needed()
    other.wait_for_timeout(300)
    shot(other, artifacts_dir, "team-02-answered-in-another-tab")

    # the first tab reconnects and sees the same run
    page.locator(".cell-answer .answer-text").wait_for(timeout=30_000)
    colours = _agent_classes(page)
    assert set(colours) == {"planner", "analyst", "reviewer"}
    assert len(set(colours.values())) == 3, colours
    dag_colours = [n["cls"] for n in dag_nodes(page).values() if n["kind"] == "step"]
    assert any(colours["analyst"] in c for c in dag_colours)
    handoffs = [e for e in dag_edges(page).values() if e["kind"] == "handoff"]
    labels = [e["label"] for e in handoffs]
    # each handoff edge takes the colour of the agent it hands to
    assert any(colours["analyst"] in e["cls"] for e in handoffs), handoffs
    assert any(label.startswith("→ analyst: the plan is set") for label in labels), (
        labels
    )
    assert any(label.startswith("→ reviewer: please check") for label in labels), labels
    dag_shots(page, artifacts_dir, "dag-team")
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


SIZES = {"1280": (1280, 800), "1920": (1920, 1080)}


def _calls_by_status(page: Any) -> dict[str, int]:
    found: dict[str, int] = page.evaluate(
        """() => {
            const counts = {};
            const count = (key) => { counts[key] = (counts[key] || 0) + 1; };
            for (const el of document.querySelectorAll('.tool-card')) {
              count(`card:${[...el.classList].find(c => c.startsWith('status-'))}`);
            }
            for (const node of window.agentui.dag.cy.nodes('.kind-call')) {
              count(`node:${node.classes().find(c => c.startsWith('status-'))}`);
            }
            return counts;
        }"""
    )
    return found


def _answered_not_waiting(page: Any, where: str, artifacts_dir: Path) -> None:
    card = page.locator(".tool-card.status-answered")
    card.first.wait_for()
    counts = _calls_by_status(page)
    assert counts.get("card:status-answered") == 1, counts
    assert counts.get("node:status-answered") == 1, counts
    for stale in ("status-waiting", "status-running", "status-pending"):
        assert not counts.get(f"card:{stale}") and not counts.get(f"node:{stale}"), (
            where,
            counts,
        )
    assert "Answered: Europe" in (card.first.text_content() or "")
    colours = page.evaluate(
        """() => ['answered', 'completed'].map(s => {
            const node = window.agentui.dag.cy.nodes(`.kind-call.status-${s}`)[0];
            return node && node.style('border-color');
        })"""
    )
    assert colours[0] and colours[0] == colours[1], (
        colours
    )  # drawn as done, not running
    card.first.scroll_into_view_if_needed()
    page.wait_for_timeout(300)  # cells off screen skip painting until shown
    for name, size in SIZES.items():
        page.set_viewport_size({"width": size[0], "height": size[1]})
        card.first.scroll_into_view_if_needed()
        shot(page, artifacts_dir, f"team-answered-{where}-{name}")


def test_an_answered_team_question_shows_answered_on_page_trace_and_rest(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=team_rules()), reset_log=True)
    pk = start_notebook(page, live_app, TEAM_PROMPT, agent="team", mode="auto")
    question = page.locator(".team-question .question-text")
    question.wait_for()
    assert question.text_content() == QUESTION
    waiting = page.locator(".tool-card.status-waiting")
    waiting.wait_for()  # while it waits, the asking call says so
    page.get_by_label("Your answer").fill("Europe")
    page.get_by_role("button", name="Send answer").click()
    page.locator(".cell-answer .answer-text").wait_for(timeout=30_000)

    _answered_not_waiting(page, "live", artifacts_dir)
    page.reload()
    page.locator(".cell-answer .answer-text").wait_for(timeout=30_000)
    _answered_not_waiting(page, "reloaded", artifacts_dir)
    page.goto(f"{live_app.url}/traces/{pk}/")
    _answered_not_waiting(page, "trace", artifacts_dir)

    token = live_app.shell(
        "from django.contrib.auth import get_user_model; "
        "from runs.service.tokens import create_token; "
        f"user = get_user_model().objects.get(username={USERNAME!r}); "
        "print(create_token(user, 'team answered')[1])"
    ).split()[-1]
    with httpx.Client(
        base_url=f"{live_app.url}/api/v1",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    ) as api:
        detail = api.get(f"/notebooks/{pk}").json()
        events = api.get(f"/notebooks/{pk}/events/").json()
    assert detail["status"] not in ("waiting", "running"), detail
    items = events["items"] if isinstance(events, dict) else events
    kinds = [e.get("event", e) for e in items]
    asked = [
        (e["waiter_id"], e["tool_id"]) for e in kinds if e["type"] == "input_required"
    ]
    answered = [
        (e["waiter_id"], e["tool_id"]) for e in kinds if e["type"] == "human_response"
    ]
    assert asked and asked == answered, (asked, answered)
    assert not page.console_errors, page.console_errors
