"""Keyboard commands on the notebook (issue 28), as in Jupyter's command mode: move between steps,
jump to the waiting one, reject a call with a reason, approve, undo, stop (asked first), `?` for
the list; none of them while the person types in a field.

Screenshots: test-artifacts/keys-*.png.
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
from dag_helpers import dag_nodes
from test_browser_notebook import compute_rules

from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser

FOCUSED_CELL = """() => { const el = document.activeElement;
    return el && el.matches('article.cell-step') ? el.id : null; }"""


def focused_field(page: Any) -> str | None:
    field: str | None = page.evaluate(
        "() => document.activeElement?.dataset.field ?? null"
    )
    return field


def test_keys_reject_a_call_approve_the_step_and_stay_out_of_fields(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compute_rules()), reset_log=True)
    start_notebook(
        page,
        live_app,
        "Compute (2 + 3) and (4 * 5), please",
        agent="function_calling",
        mode="tools",
    )
    waiting = page.locator(
        "article.cell-step.is-waiting", has=page.locator(".tool-card.editable")
    )
    waiting.wait_for()
    waiting.locator("[data-action='approve']:not(:disabled)").wait_for()
    sent = len(scripted_model.requests)
    # The DAG marks the waiting step.
    step_id = waiting.get_attribute("data-step-id")
    assert "is-waiting" in dag_nodes(page)[f"s:{step_id}"]["cls"]

    # Typing in a field is typing: "a" in the message box approves nothing.
    composer = page.get_by_role("textbox", name="Message")
    composer.focus()
    page.keyboard.type("a")
    assert composer.input_value() == "a"
    page.keyboard.press("Backspace")
    assert composer.input_value() == ""
    page.evaluate("() => document.activeElement.blur()")

    # ? lists the keys; Escape closes the list.
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard")
    dialog.wait_for()
    assert "Approve the selected step" in dialog.inner_text()
    shot(page, artifacts_dir, "keys-01-help")
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")

    # k and j move between steps; w comes back to the waiting one.
    page.keyboard.press("w")
    assert page.evaluate(FOCUSED_CELL) == f"step-{step_id}"
    page.keyboard.press("k")
    first = page.evaluate(FOCUSED_CELL)
    assert first and first != f"step-{step_id}"
    page.keyboard.press("j")
    assert page.evaluate(FOCUSED_CELL) == f"step-{step_id}"
    # the step moved to is marked in the DAG too
    assert "is-selected" in dag_nodes(page)[f"s:{step_id}"]["cls"]

    # r: the first call's reason field; Enter rejects it with that reason.
    page.keyboard.press("r")
    assert focused_field(page) == "reason:call_add"
    page.keyboard.type("not this one")
    page.keyboard.press("Enter")
    waiting.locator(".tool-card", has_text="add").locator(
        ".decision-rejected"
    ).wait_for()
    assert len(scripted_model.requests) == sent, "rejecting a call runs nothing"

    # e: the arguments of the call still to run.
    page.evaluate("() => document.activeElement.blur()")
    page.keyboard.press("w")
    page.keyboard.press("e")
    assert focused_field(page) == "args:call_mul"
    page.keyboard.press("Escape")  # leaves the field for its step
    assert page.evaluate(FOCUSED_CELL) == f"step-{step_id}"
    shot(page, artifacts_dir, "keys-02-rejected")

    # a: approve; the model is told about the rejection and gets the other call's result.
    page.keyboard.press("a")
    page.locator(".cell-answer").wait_for(timeout=20_000)
    tools = {
        m.get("tool_call_id"): str(m.get("content"))
        for m in scripted_model.requests[-1].messages
        if m.get("role") == "tool"
    }
    assert "rejected by user: not this one" in tools["call_add"], tools
    assert tools["call_mul"] == "20", tools

    # Nothing waits now: w and s say so, visibly, and do nothing.
    page.evaluate("() => document.activeElement.blur()")
    page.keyboard.press("w")
    toast = page.locator("#key-status")
    toast.wait_for()
    assert toast.inner_text() == "No step is waiting for you."
    page.keyboard.press("s")
    assert "Nothing to stop" in toast.inner_text()
    shot(page, artifacts_dir, "keys-03-done")

    # u: undo the last step (through its own button, so the same rules apply).
    steps = step_cells(page).count()
    page.keyboard.press("u")
    page.wait_for_function(
        f"() => document.querySelectorAll('article.cell-step').length < {steps}"
        " || document.querySelector('article.cell-step:last-of-type')?.dataset.status === 'pending'"
    )
    assert not page.console_errors, page.console_errors


def test_s_asks_before_stopping_the_turn(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=compute_rules()), reset_log=True)
    start_notebook(
        page, live_app, "Compute, then stop", agent="function_calling", mode="step"
    )
    page.locator(
        "article.cell-step.is-waiting [data-action='approve']:not(:disabled)"
    ).wait_for()
    page.wait_for_function("() => !document.getElementById('abandon-button').disabled")
    page.evaluate("() => document.activeElement.blur()")
    page.keyboard.press("s")
    dialog = page.get_by_role("dialog", name="Stop this turn?")
    dialog.wait_for()
    page.keyboard.press("Escape")  # says no
    dialog.wait_for(state="detached")
    assert page.locator("#abandon-button").is_enabled()
    page.keyboard.press("s")
    page.get_by_role("button", name="Stop the turn").click()
    page.locator(".turn-note", has_text="Stopped by").wait_for()
    shot(page, artifacts_dir, "keys-04-stopped")
    assert len(scripted_model.requests) == 0, "the waiting step never ran"
    assert not page.console_errors, page.console_errors
