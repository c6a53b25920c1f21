"""Corrections on the trace page in Chromium (issue 46): the edits and rejections a person made
are listed, and a reviewer writes the answer the agent should have given, sees it as a word
diff against the agent's (whose markup stays text), edits it again, and finds the notebook by
the traces list's "Has a corrected answer" filter.

Screenshots go to test-artifacts/corrections-*.png.
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
    shots_at_both_sizes,
    start_notebook,
)

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

pytestmark = pytest.mark.browser

# model output that would run script or draw markup if it were ever taken as HTML
HOSTILE_ANSWER = (
    "The total is <b>5</b>. <img src=x onerror=\"document.title='pwned'\">"
    "<script>document.title='pwned'</script> Trust me."
)
CORRECTED = "The total is 32, after the edit. Trust me."


def hostile_rules() -> list[Rule]:
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
            reply=Reply(text=HOSTILE_ANSWER),
        ),
        Rule(name="chat", reply=Reply(text="Hello.")),
    ]


def test_a_reviewer_writes_a_corrected_answer_and_sees_the_diff(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=hostile_rules()), reset_log=True)
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

    page.goto(f"{live_app.url}/traces/{task_id}/")
    panel = page.locator("#corrections-panel[data-ready='true']")
    panel.wait_for()
    kinds = panel.locator(".correction").evaluate_all(
        "items => items.map(i => i.dataset.kind)"
    )
    assert kinds == ["edited_arguments", "rejected_call"]
    assert '"b": 30' in panel.locator(".correction-after").inner_text()
    assert (
        "not needed for this question"
        in panel.locator(".correction-rejected_call").inner_text()
    )

    answer = page.locator(".cell-answer").first
    answer.get_by_role("button", name="Write the corrected answer").click()
    box = answer.get_by_label("The answer turn 1 should have given")
    assert box.input_value() == HOSTILE_ANSWER, (
        "starts from the agent's answer, as text"
    )
    box.fill("   ")
    answer.get_by_role("button", name="Save corrected answer").click()
    alert = answer.locator(".corrected-answer [role=alert]")
    alert.wait_for()
    assert "Write the answer" in alert.inner_text()
    box.fill(CORRECTED)
    answer.get_by_role("button", name="Save corrected answer").click()
    diff = answer.locator(".corrected-answer .answer-diff")
    diff.wait_for()
    # the agent's markup is in the diff as text, struck out; none of it became elements
    removed = diff.locator("del").all_inner_texts()
    assert any("<script>" in text for text in removed), removed
    assert any("<img" in text for text in removed), removed
    assert diff.locator("script, img, b").count() == 0
    assert "32, after the edit." in " ".join(diff.locator("ins").all_inner_texts())
    assert page.title() != "pwned"
    assert "by analyst" in answer.locator(".corrected-by").inner_text()
    panel.locator(".correction-corrected_answer").wait_for()
    page.locator("#corrections-heading").scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "corrections-01-trace-list")
    answer.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "corrections-02-corrected-answer")

    # an edit is a new version; the agent's answer is untouched
    answer.get_by_role("button", name="Edit the corrected answer").click()
    assert box.input_value() == CORRECTED
    box.fill(CORRECTED + " Checked twice.")
    answer.get_by_role("button", name="Save corrected answer").click()
    answer.locator(".corrected-by", has_text="version 2").wait_for()
    stored = page.request.get(f"{live_app.url}/api/tasks/{task_id}/corrections/").json()
    assert [a["text"] for a in stored["answers"][0]["versions"]] == [
        CORRECTED,
        CORRECTED + " Checked twice.",
    ]
    assert stored["answers"][0]["agent_answer"] == HOSTILE_ANSWER

    page.goto(f"{live_app.url}/traces/?corrected=answer")
    row = page.locator(f"#trace-rows tr:has(a[href='/traces/{task_id}/'])")
    row.wait_for()
    assert "1 edit · 1 rejected call · 1 corrected answer" in row.inner_text()
    assert page.get_by_label("Corrected").input_value() == "answer"
    shots_at_both_sizes(page, artifacts_dir, "corrections-03-traces-filter")
    assert not page.console_errors, page.console_errors
