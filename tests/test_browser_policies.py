"""Approval policies and batch decisions in Chromium (issue 30): a waiting call's card makes a
rule ("Approve and always allow … in all my notebooks"), the next notebook's calls then run
without asking and their card says which rule approved them, the Policies page lists the rule
and revokes it, and "Reject all" rejects every call of a step with one reason.

Screenshots: test-artifacts/policies-*.png.
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
    shots_at_both_sizes,
    start_notebook,
)
from live_support import ANSWER, QUESTION, analyst_rules

from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser


def test_a_rule_from_the_card_approves_the_next_calls_and_is_revoked_on_the_policies_page(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(Script(rules=analyst_rules()), reset_log=True)
    start_notebook(page, live_app, QUESTION, agent="function_calling", mode="tools")
    remember = page.get_by_role(
        "button", name="Approve and always allow add and multiply in all my notebooks"
    )
    remember.wait_for()
    shots_at_both_sizes(page, artifacts_dir, "policies-01-card-offers-rules")
    remember.click()
    page.locator(".cell-answer").wait_for()
    assert ANSWER in page.locator(".cell-answer").inner_text()
    set_rules = page.locator(".human-action.action-set_rule")
    assert set_rules.count() == 2

    # a new notebook: its calls run unasked, and the card names the rule that approved them
    start_notebook(page, live_app, QUESTION, agent="function_calling", mode="tools")
    page.locator(".cell-answer").wait_for()
    auto = page.locator(".human-action.action-auto_approved")
    assert auto.count() == 2
    text = auto.first.inner_text()
    assert text.startswith("Approved automatically add by rule #")
    assert "always allow add, set by" in text
    assert page.locator(".human-action.action-approved").count() == 0
    auto.first.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "policies-02-approved-by-rule")

    page.goto(f"{live_app.url}/policies/")
    rows = page.locator("table.policies tbody tr")
    assert rows.count() == 2
    shots_at_both_sizes(page, artifacts_dir, "policies-03-page")
    confirm_ready(page, "form[data-revoke-rule]")
    rows.filter(has_text="multiply").get_by_role("button", name="Revoke").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke rule").click()
    page.locator(".revoked-policies li").wait_for()
    assert page.locator("table.policies tbody tr").count() == 1
    assert "always allow multiply" in page.locator(".revoked-policies").inner_text()

    # multiply asks again: the step waits; reject every call with one reason
    start_notebook(page, live_app, QUESTION, agent="function_calling", mode="tools")
    reason = page.get_by_label("Reject every pending call")
    reason.wait_for()
    reason.fill("not now")
    page.get_by_role("button", name="Reject all 2 calls").click()
    page.locator(".cell-answer").wait_for()
    reasons = page.locator(".human-action.action-rejected_call .tool-reason")
    assert reasons.all_inner_texts() == ["Reason: not now"] * 2
    shots_at_both_sizes(page, artifacts_dir, "policies-04-rejected-all")
    assert page.console_errors == []
