"""The inbox and deadlines in Chromium (issue 30): a step that starts waiting in a notebook open in
one tab appears live in the inbox open in another, with the nav's count; approving it from the
inbox with the keyboard runs it and the notebook goes on to its answer. A notebook's short
deadline shows as a countdown on the waiting card, passes, and the calls are rejected
automatically (no page decides; the server's sweep does), with the audit saying so.

Screenshots: test-artifacts/inbox-*.png.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    USERNAME,
    VIEWPORT,
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    shots_at_both_sizes,
    start_notebook,
    wait_until,
    watch_errors,
)
from live_support import (
    ANSWER,
    COMPILER_QUESTION,
    QUESTION,
    analyst_rules,
    compiler_rules,
)

from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser


@pytest.fixture
def app_env() -> dict[str, str]:
    return {"AGENTUI_DEADLINE_SWEEP_S": "0.3"}


# Records each browser notification the page shows (then shows it): what the person would see.
RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  if (!Real) return;
  window.__shown = [];
  window.Notification = class extends Real {
    constructor(title, options) {
      window.__shown.push({ title, body: options?.body, tag: options?.tag });
      super(title, options);
    }
  };
})();
"""


def test_a_step_waiting_in_one_tab_is_decided_from_the_inbox_in_another_with_keys(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(Script(rules=analyst_rules()), reset_log=True)
    page.context.grant_permissions(["notifications"], origin=live_app.url)
    page.context.add_init_script(RECORD_NOTIFICATIONS)
    page.goto(f"{live_app.url}/inbox/")
    page.locator("#inbox-empty:not([hidden])").wait_for()
    badge = page.locator("[data-inbox-count]")
    assert badge.is_hidden()
    # notifications only after the person's click
    page.get_by_role("button", name="Turn on browser notifications").click()
    page.get_by_role("button", name="Turn off browser notifications").wait_for()

    notebook = new_context().new_page()
    task = start_notebook(
        notebook, live_app, QUESTION, agent="function_calling", mode="tools"
    )

    item = page.locator(f".inbox-item[data-notebook='{task}']")
    item.wait_for()  # live: the inbox tab was not reloaded
    assert badge.inner_text() == "1"
    assert page.locator("#inbox-summary").inner_text() == "1 step waits for you."
    args = item.get_by_label("add arguments").input_value()
    assert json.loads(args) == {"a": 2, "b": 3}
    shown = page.evaluate("window.__shown")
    assert shown == [
        {
            "title": "A step waits for you",
            "body": QUESTION,
            "tag": f"agentui-wait-{task}",
        }
    ]
    # the notebook tab's own nav counts it too
    notebook.locator("[data-inbox-count]:not([hidden])").wait_for()
    assert notebook.locator("[data-inbox-count]").inner_text() == "1"

    # a second notebook waits too; it is listed after the first (longest-waiting first)
    other = new_context().new_page()
    second = start_notebook(
        other, live_app, QUESTION, agent="function_calling", mode="tools"
    )
    page.locator(f".inbox-item[data-notebook='{second}']").wait_for()
    assert badge.inner_text() == "2"
    shots_at_both_sizes(page, artifacts_dir, "inbox-01-steps-wait")

    # keys: j selects the second, r goes to its reason, Enter rejects every call
    assert "selected" in (item.get_attribute("class") or "")
    page.locator("body").press("j")
    page.locator("body").press("r")
    page.keyboard.type("not this one")
    page.keyboard.press("Enter")
    page.locator(f".inbox-item[data-notebook='{second}']").wait_for(state="detached")
    assert badge.inner_text() == "1"
    # what is left is selected: a approves it
    assert "selected" in (item.get_attribute("class") or "")
    page.locator("body").press("a")
    page.locator("#inbox-empty:not([hidden])").wait_for()
    assert badge.is_hidden()

    notebook.locator(".cell-answer").wait_for()
    assert ANSWER in notebook.locator(".cell-answer").inner_text()
    approved = notebook.locator(".human-action.action-approved .who")
    assert approved.all_inner_texts() == [USERNAME]  # the person, not "automatically"
    other.locator(".cell-answer").wait_for()
    reasons = other.locator(".human-action.action-rejected_call .tool-reason")
    assert reasons.all_inner_texts() == ["Reason: not this one"] * 2
    shots_at_both_sizes(notebook, artifacts_dir, "inbox-02-notebook-went-on")
    shot(page, artifacts_dir, "inbox-03-empty-again")
    assert page.console_errors == []


def test_a_plan_call_waits_in_the_inbox_with_how_it_was_planned(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    new_context: Any,
    artifacts_dir: Path,
) -> None:
    """An LLMCompiler call that uses earlier results waits with their values in its arguments
    (what runs) and says, as text, how it was planned: "Planned as {"a":"$1","b":"$2"}"."""
    scripted_model.load(Script(rules=compiler_rules()), reset_log=True)
    page.goto(f"{live_app.url}/inbox/")
    page.locator("#inbox-empty:not([hidden])").wait_for()
    notebook = new_context().new_page()
    task = start_notebook(
        notebook, live_app, COMPILER_QUESTION, agent="llm_compiler", mode="tools"
    )
    first = page.locator(f".inbox-item[data-notebook='{task}']")
    first.get_by_label("multiply arguments").wait_for()
    assert first.locator(".tool-planned").count() == 0, "planned with values: no note"
    page.locator("body").press("a")  # approve $1 and $2

    third = page.locator(f".inbox-item[data-notebook='{task}']", has_text="Planned as")
    third.wait_for()
    assert json.loads(third.get_by_label("add arguments").input_value()) == {
        "a": 12,
        "b": 30,
    }
    planned = third.locator(".inbox-call .tool-planned")
    assert planned.inner_text() == 'Planned as {"a":"$1","b":"$2"}'
    assert planned.locator("code").evaluate("c => c.children.length") == 0, "text only"
    third.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "inbox-04-planned-as")

    page.locator("body").press("a")
    notebook.locator(".cell-answer").wait_for()
    assert "42" in notebook.locator(".cell-answer").inner_text()
    assert page.console_errors == []


def test_a_passed_deadline_rejects_the_calls_automatically_and_says_so(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
) -> None:
    scripted_model.load(Script(rules=analyst_rules()), reset_log=True)
    task = start_notebook(
        page, live_app, "Hello", agent="function_calling", mode="tools"
    )
    page.locator(".cell-answer").wait_for()

    # a short deadline (the picker offers minutes; the server takes any whole seconds)
    page.locator(".nb-deadline summary").click()
    page.locator("#deadline-seconds").evaluate(
        "s => s.add(new Option('3 s', '3', true, true))"
    )
    page.get_by_label("by").select_option("reject")
    shots_at_both_sizes(page, artifacts_dir, "inbox-04-deadline-picker")
    page.get_by_role("button", name="Save deadline").click()
    page.wait_for_url(f"**/tasks/{task}/")
    page.locator("#connection[data-state='open']").wait_for()
    assert page.locator("#deadline-label").inner_text() == "3 s, then reject"

    page.get_by_role("textbox", name="Message").fill(QUESTION)
    page.get_by_role("button", name="Send").click()
    countdown = page.locator(".step-controls .deadline")
    countdown.wait_for()
    assert countdown.inner_text().startswith("Rejected automatically in")
    countdown.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "inbox-05-deadline-countdown")

    automatic = page.locator(".human-action.action-rejected_call.is-automatic")
    automatic.first.wait_for(timeout=20_000)  # the sweep, with no click
    # the two calls' rejections arrive as two events; the second may come a moment later
    wait_until(lambda: automatic.count() == 2, message="both calls rejected")
    assert "rejected add automatically: the deadline of 3 s passed" in " ".join(
        automatic.first.inner_text().split()
    )
    page.locator("section.turn").nth(1).locator(".cell-answer").wait_for()
    told = [m for m in scripted_model.requests[-1].messages if m.get("role") == "tool"]
    assert len(told) == 2
    assert all(
        "Rejected automatically: the deadline of 3 s passed." in m["content"]
        for m in told
    )
    automatic.first.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "inbox-06-rejected-automatically")
    assert page.console_errors == []


def test_a_group_reviewer_decides_a_members_step_from_their_own_inbox(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    _browser_module: Any,
    artifacts_dir: Path,
) -> None:
    """rita reviews the group she shares with the analyst: the analyst's waiting step is in
    her inbox, marked as the analyst's and not linked (the notebook stays theirs); her
    rejection reaches the analyst's notebook, recorded under her name."""
    scripted_model.load(Script(rules=analyst_rules()), reset_log=True)
    live_app.shell(
        "from django.contrib.auth.models import Group, Permission, User; "
        "rita, _ = User.objects.get_or_create(username='rita'); "
        "group = Group.objects.create(name='sales'); "
        f"group.user_set.add(rita, User.objects.get(username={USERNAME!r})); "
        "group.permissions.add(Permission.objects.get(codename='review_group'))"
    )
    context = _browser_module.browser.new_context(viewport=VIEWPORT)
    reviewer = context.new_page()
    errors = watch_errors(reviewer)
    reviewer.goto(
        live_app.call("login_link", "rita", "--base-url", live_app.url).strip()
    )
    reviewer.goto(f"{live_app.url}/inbox/")
    reviewer.locator("#inbox-empty:not([hidden])").wait_for()

    task = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="tools"
    )
    item = reviewer.locator(f".inbox-item[data-notebook='{task}']")
    item.wait_for()  # live, from another person's notebook
    assert item.locator(".inbox-owner").inner_text() == f"{USERNAME}'s"
    assert item.locator("a.inbox-title").count() == 0  # not hers to open
    shots_at_both_sizes(reviewer, artifacts_dir, "inbox-03-group-reviewer")
    item.get_by_label("Reason to reject").fill("not on the sales data")
    item.get_by_role("button", name="Reject").click()
    reviewer.locator("#inbox-empty:not([hidden])").wait_for()

    # the analyst's notebook shows who decided
    page.get_by_text("rita", exact=False).first.wait_for()
    actions = json.loads(
        live_app.shell(
            "import json; from runs.models import Event; "
            f"print(json.dumps([e.payload for e in Event.objects.filter(task_id={task}, "
            "type='human_action').order_by('seq')]))"
        )
        .strip()
        .splitlines()[-1]
    )
    assert {a["by"] for a in actions} == {"rita"}
    assert "rejected_call" in {a["action"] for a in actions}
    assert errors == []
    context.close()
