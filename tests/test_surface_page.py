"""What the person sees is what ran, in the notebook page (issue 25): in Chromium, a tools-mode
notebook served by daphne with recorded tools — the person edits a pending call's arguments,
rejects another with a reason, approves, undoes two steps, edits and approves again, forks at
the step that proposed a call and edits it there — and what the page shows (the call cards,
their earlier undone runs, the Human actions lists, on the notebook and on the trace page) is
held against what the scripted model server received and what the tools ran
(tests/audit_support.py). Screenshots: test-artifacts/surface-page-*.png, at both window sizes.
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
    shots_at_both_sizes,
    start_notebook,
    step_cells,
    wait_until,
)
from recorded_tools import LOG_VARIABLE, executions

from runs.demo.analyst import LLM_COMPILER_PROMPT, llm_compiler_rules
from runs.engine.testing import Script, ScriptedServer
from tests import audit_support as audit

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def tool_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("surface-page") / "tools.jsonl"


@pytest.fixture
def app_env(tool_log: Path) -> dict[str, str]:
    """The live app runs the recorded tools (tests/recorded_tools.py)."""
    return {"DJANGO_SETTINGS_MODULE": "surface_settings", LOG_VARIABLE: str(tool_log)}


# What the page shows of every step: its call cards (those that ran, undone runs included, and
# rejected ones) and its Human actions list, read from the DOM.
_READ_PAGE = """
() => [...document.querySelectorAll('article.cell-step')].map((cell) => ({
  step_id: cell.dataset.stepId,
  calls: [...cell.querySelectorAll('.tool-card[data-tool-id]')].map((card) => {
    const result = card.querySelector('.tool-result');
    const reason = card.querySelector('.tool-reason');
    return {
      tool_id: card.dataset.toolId,
      tool: card.querySelector('.tool-name').textContent,
      arguments: card.querySelector('.tool-args').textContent,
      // a rounded number keeps the exact value it stands for (format.js numberView)
      result: result ? [...result.children].filter((c) => !c.classList.contains('field-label'))
        .map((c) => c.querySelector('[data-raw]')?.dataset.raw ?? c.dataset.raw ?? c.textContent)
        .join('') : null,
      reason: reason ? reason.textContent : null,
    };
  }),
  actions: [...cell.querySelectorAll('.human-actions li')].map((li) => ({
    action: li.dataset.action,
    by: li.querySelector('.who').textContent,
    before: li.querySelector('.edit-before pre')?.textContent ?? null,
    after: li.querySelector('.edit-after pre')?.textContent ?? null,
    reason: li.querySelector('.tool-reason')?.textContent ?? null,
  })),
}))
"""
REJECTED_NOTE = "Rejected, not run. Reason: "


def shown_runs(cells: list[dict[str, Any]]) -> list[audit.Ran]:
    """The tool runs the page shows: each card with a result, and each rejected card as the
    rejection the model is told."""
    runs = []
    for cell in cells:
        for call in cell["calls"]:
            if call["result"] is not None:
                output = call["result"]
            elif call["reason"] and call["reason"].startswith(REJECTED_NOTE):
                reason = call["reason"].removeprefix(REJECTED_NOTE)
                output = f"{audit.REJECTION_PREFIX}: {reason}"
            else:
                continue  # proposed, not run
            runs.append(
                audit.Ran(
                    call["tool_id"],
                    call["tool"],
                    audit.canonical(call["arguments"]),
                    output,
                )
            )
    return runs


def shown_actions(cells: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    """Each step's Human actions list: (action, by, before, after, reason)."""

    def value(text: str | None) -> Any:
        return None if text is None else json.loads(text)

    return {
        cell["step_id"]: [
            (
                a["action"],
                a["by"],
                value(a["before"]),
                value(a["after"]),
                a["reason"].removeprefix("Reason: ") if a["reason"] else None,
            )
            for a in cell["actions"]
        ]
        for cell in cells
        if cell["actions"]
    }


def stored_actions(events: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    by_step: dict[str, list[tuple[Any, ...]]] = {}
    for e in events:
        if e["type"] == "human_action":
            by_step.setdefault(e["step_id"], []).append(
                (e["action"], e["by"], e.get("before"), e.get("after"), e.get("reason"))
            )
    return by_step


def page_problems(
    cells: list[dict[str, Any]], events: list[dict[str, Any]]
) -> list[str]:
    """Where a page's cards and Human actions disagree with the notebook's stored events."""
    problems = []
    shown, stored = sorted(shown_runs(cells)), sorted(audit.results_in(events))
    if shown != stored:
        problems.append(f"the page shows runs {shown}, the audit holds {stored}")
    if shown_actions(cells) != stored_actions(events):
        problems.append(
            f"the page lists {shown_actions(cells)}, the audit {stored_actions(events)}"
        )
    return problems


def pending_calls(page: Any) -> Any:
    cell = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable"),
    )
    cell.wait_for()
    return cell


def edit_arguments(cell: Any, tool: str, arguments: dict[str, Any]) -> None:
    cell.get_by_label(f"Arguments for {tool} (JSON)").fill(json.dumps(arguments))
    cell.get_by_role("button", name="Save edits").click()
    cell.locator(".human-action.action-edited_arguments").last.wait_for()


def read(page: Any, url: str, ready: str) -> list[dict[str, Any]]:
    page.goto(url)
    page.wait_for_selector(ready)
    return list(page.evaluate(_READ_PAGE))


def shown_problems(
    page: Any, app: LiveApp, pk: int, events: list[dict[str, Any]]
) -> list[str]:
    """Where notebook `pk`'s page and its trace page disagree with its stored `events`."""
    notebook = read(page, f"{app.url}/tasks/{pk}/", "#connection[data-state='open']")
    trace = read(page, f"{app.url}/traces/{pk}/", "#trace[data-ready='true']")
    return [f"notebook {pk}: {p}" for p in page_problems(notebook, events)] + [
        f"trace {pk}: {p}" for p in page_problems(trace, events)
    ]


def stored_events(page: Any, app: LiveApp, pk: int) -> list[dict[str, Any]]:
    """The notebook's events as the page's own Export JSON gives them."""
    response = page.request.get(f"{app.url}/api/tasks/{pk}/trace.json")
    assert response.ok, response.text()
    return [e["event"] for e in response.json()["events"]]


def test_what_the_page_shows_is_what_reached_the_model_and_the_tools(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    tool_log: Path,
) -> None:
    scripted_model.load(Script(rules=audit.ledger_rules()), reset_log=True)
    source = start_notebook(
        page, live_app, audit.LEDGER_QUESTION, agent="function_calling", mode="tools"
    )
    calls = pending_calls(page)
    edit_arguments(calls, "add", audit.EDITED_ADD)
    mul = calls.locator(".tool-card", has_text="multiply")
    mul.get_by_label("Reason to reject").fill(audit.REJECTION)
    mul.get_by_role("button", name="Reject call").click()
    calls.locator(".human-action.action-rejected_call").wait_for()
    shots_at_both_sizes(page, artifacts_dir, "surface-page-1-decided")
    calls.get_by_role("button", name="Approve and run").click()

    double = page.locator(
        "article.cell-step[data-status='pending']",
        has=page.locator(".tool-card.editable[data-tool-id='call_dbl']"),
    )
    double.get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for()
    # take back the answer, then the doubling; double the corrected sum instead
    for n in (4, 3):
        cell = step_cells(page).nth(n)
        cell.get_by_role("button", name="Undo this step").click()
        cell.locator("[data-action='approve']").wait_for()
    again = pending_calls(page)
    edit_arguments(again, "multiply", audit.EDITED_DOUBLE)
    again.get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for()
    shots_at_both_sizes(page, artifacts_dir, "surface-page-2-notebook")

    # fork at the step that proposed the doubling, and double something else there
    step_cells(page).nth(2).get_by_role("button", name="Fork here").click()
    page.wait_for_url(lambda url: f"/tasks/{source}/" not in url and "/tasks/" in url)
    page.wait_for_selector("#connection[data-state='open']")
    fork = int(page.url.rstrip("/").rsplit("/", 1)[1])
    copied = len(stored_events(page, live_app, fork))
    in_fork = pending_calls(page)
    edit_arguments(in_fork, "multiply", audit.FORK_DOUBLE)
    in_fork.get_by_role("button", name="Approve and run").click()
    answer_step = page.locator(
        "article.cell-step[data-status='pending']", has_not=page.locator(".tool-card")
    )
    # a fork runs in step mode
    answer_step.get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for()
    shots_at_both_sizes(page, artifacts_dir, "surface-page-3-fork")

    events = {pk: stored_events(page, live_app, pk) for pk in (source, fork)}
    own = events[source] + events[fork][copied:]
    ran = executions(tool_log)
    expected = audit.ledger_executions()
    assert sorted(map(audit.canonical, ran)) == sorted(map(audit.canonical, expected))
    problems = audit.wire_problems(scripted_model.requests, own, ran)
    for pk in (source, fork):
        problems += audit.approval_problems(events[pk])
        problems += shown_problems(page, live_app, pk, events[pk])
    assert not problems, "\n".join(problems)
    shots_at_both_sizes(page, artifacts_dir, "surface-page-4-fork-trace")
    assert audit.human_actions(events[source])[:2] == [
        (
            "edited_arguments",
            USERNAME,
            "call_add",
            {"a": 2, "b": 3},
            audit.EDITED_ADD,
            None,
        ),
        ("rejected_call", USERNAME, "call_mul", None, None, audit.REJECTION),
    ]
    assert not page.console_errors, page.console_errors


def test_a_plans_edited_call_is_what_the_page_the_model_and_the_tool_saw(
    page: Any,
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    tool_log: Path,
    artifacts_dir: Path,
) -> None:
    """LLMCompiler in tools mode: its plan's calls wait; the person corrects one's SQL; the
    call that uses both results then waits shown with their values (what runs), not `$1`."""
    scripted_model.load(Script(rules=llm_compiler_rules()), reset_log=True)
    ran_before = len(executions(tool_log))
    pk = start_notebook(
        page, live_app, LLM_COMPILER_PROMPT, agent="llm_compiler", mode="tools"
    )
    calls = pending_calls(page)
    card = calls.locator(".tool-card.editable").first
    tool_id = card.get_attribute("data-tool-id")
    field = card.locator(f"[data-field='args:{tool_id}']")
    original = json.loads(field.input_value())
    edited = {**original, "sql": audit.edited_sql(original["sql"])}
    assert edited != original
    field.fill(json.dumps(edited))
    calls.get_by_role("button", name="Save edits").click()
    calls.locator(".human-action.action-edited_arguments").wait_for()
    shots_at_both_sizes(page, artifacts_dir, "surface-page-5-plan-edited")
    # the approval runs the two queries; the evaluation, which uses their results, waits next
    calls.get_by_role("button", name="Approve and run").click()
    evaluation = page.locator(
        "article.cell-step[data-status='pending'] .tool-card.editable",
        has=page.get_by_label("Arguments for evaluate (JSON)"),
    )
    evaluation.wait_for()
    shown = json.loads(
        evaluation.get_by_label("Arguments for evaluate (JSON)").input_value()
    )
    assert "$" not in shown["expression"], shown
    planned = evaluation.locator(".tool-planned")
    assert "$1" in planned.inner_text() and "$2" in planned.inner_text()
    # the card may be drawn again as the run's events arrive: scroll whichever is there now
    evaluation.evaluate("(card) => card.scrollIntoView({ block: 'center' })")
    shots_at_both_sizes(page, artifacts_dir, "surface-page-6-plan-call-with-values")
    # the joiner then answers by itself in tools mode
    page.locator("article.cell-step[data-status='pending']").get_by_role(
        "button", name="Approve and run"
    ).click()
    page.locator(".cell-answer").wait_for()
    shots_at_both_sizes(page, artifacts_dir, "surface-page-7-plan-answered")

    events = stored_events(page, live_app, pk)
    ran = executions(tool_log)[ran_before:]
    assert ("sql_value", edited) in ran and ("sql_value", original) not in ran
    assert ("evaluate", shown) in ran  # what the page showed waiting is what ran
    problems = audit.wire_problems(
        scripted_model.requests, events, ran, calls_as_messages=False
    )
    problems += audit.approval_problems(events)
    problems += shown_problems(page, live_app, pk, events)
    assert not problems, "\n".join(problems)
    assert not page.console_errors, page.console_errors
