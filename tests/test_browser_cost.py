"""Cost in Chromium: each step card, the turn's answer, the trace's totals and the traces list
say what was spent ("$0.0042 · 1,234 tokens", the exact figures in the tooltip), or that the
price is unknown, never $0. Screenshots: cost-*.png at 1280x800 and 1920x1080."""

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

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, Usage

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
