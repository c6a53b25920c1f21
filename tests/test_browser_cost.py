"""Cost and budgets in Chromium: each step card, the turn's answer, the trace's totals and the
traces list say what was spent ("$0.0042 · 1,234 tokens", the exact figures in the tooltip), or
that the price is unknown, never $0; a run over the budget set in the toolbar waits with the
reason, and goes on when approved (the raise on record) or stops. Screenshots: cost-*.png and
budget-*.png at 1280x800 and 1920x1080."""

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
    shots_at_both_sizes,
    start_notebook,
    step_cells,
)

from runs.engine.testing import (
    Match,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    ToolCallSpec,
    Usage,
)

pytestmark = pytest.mark.browser

QUESTION = "Cost check: what is 2 + 3?"


def script() -> Script:
    return Script(
        rules=[
            Rule(
                name="answer",
                match=Match(tool_results_since_user=0),
                reply=Reply(
                    text="It is 5.",
                    usage=Usage(prompt_tokens=1200, completion_tokens=34),
                ),
            )
        ]
    )


def set_price(app: LiveApp, model: str, usd_in: str, usd_out: str) -> None:
    app.shell(
        "from decimal import Decimal; from runs.models import ModelPrice; "
        f"ModelPrice.objects.update_or_create(model={model!r}, defaults=dict("
        f"input_usd_per_million=Decimal({usd_in!r}), output_usd_per_million=Decimal({usd_out!r})))"
    )


def test_step_turn_trace_and_list_show_what_was_spent(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(script(), reset_log=True)
    live_app.shell(
        "from runs.models import ModelPrice; ModelPrice.objects.filter(model='scripted').delete()"
    )
    unpriced = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer").wait_for()
    meta = step_cells(page).first.locator(".cell-meta")
    assert "1,234 tokens · price unknown" in meta.inner_text()  # never $0
    assert "no price is set" in (meta.get_attribute("title") or "")

    set_price(live_app, "scripted", "2.5", "10")
    priced = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer").wait_for()
    meta = step_cells(page).first.locator(".cell-meta")
    # 1,200 × $2.5/M + 34 × $10/M = $0.00334
    assert meta.inner_text().endswith("$0.0033 · 1,234 tokens"), meta.inner_text()
    assert "$0.00334 exactly" in (meta.get_attribute("title") or "")
    turn = page.locator(".cell-answer .turn-cost")
    assert turn.inner_text() == "this turn: $0.0033 · 1,234 tokens"
    assert not page.console_errors, page.console_errors
    shots_at_both_sizes(page, artifacts_dir, "cost-notebook")

    page.goto(f"{live_app.url}/traces/{priced}/")
    total = page.locator("dd[data-total='cost']")
    total.wait_for()
    assert total.inner_text() == "$0.0033"
    assert (
        step_cells(page)
        .first.locator(".cell-meta")
        .inner_text()
        .endswith("$0.0033 · 1,234 tokens")
    )
    shots_at_both_sizes(page, artifacts_dir, "cost-trace")

    live_app.shell(
        "from runs.models import ModelPrice; ModelPrice.objects.filter(model='scripted').delete()"
    )
    page.goto(f"{live_app.url}/traces/{unpriced}/")
    page.locator("dd[data-total='cost']").wait_for()
    assert page.locator("dd[data-total='cost']").inner_text() == "price unknown"

    set_price(live_app, "scripted", "2.5", "10")
    page.goto(f"{live_app.url}/traces/")
    row = page.locator(f"#trace-rows tr[data-task-id='{priced}'] td[data-col='cost']")
    row.wait_for()
    assert row.inner_text() == "$0.0033"
    assert row.get_attribute("title") == "$0.00334 exactly"
    assert not page.console_errors, page.console_errors
    shots_at_both_sizes(page, artifacts_dir, "cost-list")


BUDGET_QUESTION = "Budget check: add 2 and 3"


def budget_script() -> Script:
    spend = Usage(prompt_tokens=1000, completion_tokens=20)
    return Script(
        rules=[
            Rule(
                name="calls",
                match=Match(
                    last_user_contains="Budget check", tool_results_since_user=0
                ),
                reply=Reply(
                    text="Let me add them.",
                    tool_calls=[
                        ToolCallSpec(
                            name="add", arguments={"a": 2, "b": 3}, id="call_add"
                        )
                    ],
                    usage=spend,
                ),
            ),
            Rule(
                name="answer",
                match=Match(tool_results_since_user=1),
                reply=Reply(text="2 + 3 = 5.", usage=spend),
            ),
            Rule(name="chat", reply=Reply(text="Hello, ask me to add.", usage=spend)),
        ]
    )


def send(page: Any, text: str) -> None:
    page.locator("#composer-text").fill(text)
    page.locator("#composer-send").click()


def test_a_run_over_its_budget_waits_with_the_reason_then_goes_on_or_stops(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(budget_script(), reset_log=True)
    start_notebook(page, live_app, "Hello", agent="function_calling", mode="auto")
    page.locator(".cell-answer").wait_for()

    # the toolbar sets this notebook's run budget: 5 tokens
    page.locator(".nb-budget summary").click()
    page.get_by_label("or tokens").fill("5")
    page.get_by_role("button", name="Save budget").click()
    page.wait_for_selector("#connection[data-state='open']")
    assert page.locator("#budget-label").inner_text() == "1,020 of 5 tokens this run"

    send(page, BUDGET_QUESTION)
    note = page.locator(".budget-note")
    note.wait_for()
    assert note.inner_text().startswith(
        "Budget of 5 tokens for this run reached: 1,020 tokens spent."
    )
    approve = page.get_by_role(
        "button", name="Raise the budget to 1,025 tokens and go on"
    )
    assert approve.is_enabled()
    assert page.locator(".nb-budget").get_attribute("class").endswith("is-reached")
    assert (
        len(scripted_model.requests) == 2
    )  # the chat, the first step: nothing more ran
    shots_at_both_sizes(page, artifacts_dir, "budget-waiting")

    approve.click()
    page.locator(".turn:nth-of-type(2) .cell-answer").wait_for()
    assert (
        "2 + 3 = 5." in page.locator(".turn:nth-of-type(2) .cell-answer").inner_text()
    )
    raised = page.locator(".human-action.action-budget_raised")
    assert "let the run go on past its budget" in raised.inner_text()
    assert "raised from 5 tokens to 1,025 tokens" in raised.inner_text()
    assert (
        page.locator("#budget-label").inner_text() == "2,040 of 1,025 tokens this run"
    )

    send(page, BUDGET_QUESTION)
    page.locator(".turn:nth-of-type(3) .budget-note").wait_for()
    page.locator(".turn:nth-of-type(3) [data-action='stop-budget']").click()
    page.locator("dialog.confirm-dialog .confirm-yes").click()
    page.locator(".turn:nth-of-type(3) .turn-stopped").wait_for()
    # chat 1, the raised run 2, this run 1: its waiting step never ran
    assert len(scripted_model.requests) == 4
    assert not page.console_errors, page.console_errors
    shots_at_both_sizes(page, artifacts_dir, "budget-stopped")
