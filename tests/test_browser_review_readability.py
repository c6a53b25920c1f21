"""Reading a run after the fact, in Chromium (issue 48, items 7 and 8): Compare draws a Chain of
Abstraction's reasoning as chips (each naming its call, its arguments and its result) and tool
inputs as argument tables; the trace timeline shows each wait for a person as a span of its
own, saying who decided, with no bar too thin to see; and the small words of the page: an
answer's sentence ends once, an edit of an empty input says it added the text, the branches'
"Approve all" is offered once. Screenshots: test-artifacts/readability-*.png.
"""

from __future__ import annotations

import re
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
    shot,
    shots_at_both_sizes,
    start_notebook,
    step_cells,
    wait_until,
)
from playwright.sync_api import expect

from runs.demo.analyst import COA_PROMPT, coa_rules
from runs.demo.research import RESEARCH_PROMPT, research_rules
from runs.demo.team import TEAM_PROMPT, team_rules
from runs.engine.testing import Script, ScriptedServer
from tests.live_support import QUESTION, analyst_rules

pytestmark = pytest.mark.browser


def _coa_notebook(page: Any, app: LiveApp) -> int:
    pk = start_notebook(page, app, COA_PROMPT, agent="coa", mode="auto")
    page.locator(".cell-answer").wait_for(timeout=20_000)
    return pk


def test_compare_shows_a_chain_as_chips_and_tool_inputs_as_argument_tables(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=coa_rules()), reset_log=True)
    a = _coa_notebook(page, live_app)
    b = _coa_notebook(page, live_app)
    page.goto(f"{live_app.url}/traces/compare/?a={a}&b={b}")
    page.wait_for_selector("#compare[data-ready='true']")
    reasoning = page.locator(".compare-step").first
    for side in range(2):
        output = (
            reasoning.locator(".compare-cell").nth(side).locator("[data-field=output]")
        )
        assert "[FUNC" not in output.inner_text()
        chips = output.locator(".chain-chip")
        assert chips.count() == 7
        found = chips.evaluate_all(
            """cs => cs.map(c => ({name: c.dataset.output, state: c.dataset.state,
                call: c.querySelector('.chip-call')?.textContent,
                value: c.querySelector('.chip-value').textContent}))"""
        )
        # each chip: the result's name, the call computing it (tool and arguments), its value
        assert [c["name"] for c in found] == [f"y{n}" for n in range(1, 8)]
        assert all(c["state"] == "done" for c in found), found
        assert all(re.fullmatch(r"\w+\(.+\)", c["call"] or "") for c in found), found
        by_name = {c["name"]: c for c in found}
        assert by_name["y2"]["value"] == "970" and by_name["y5"]["value"] == "950"

    # two runs of the same chain: nothing differs (a tool step's input is its calls, whose
    # ids differ between runs; it is shown and compared as its calls)
    assert page.locator(".compare-step[data-differs=true]").count() == 0
    assert page.locator(".compare-tool_calls, .compare-step").count() == 5
    page_text = page.locator("#compare-rows").inner_text()
    assert "tool_kwargs" not in page_text and "tool_id" not in page_text
    calls = page.locator(".compare-calls")
    assert calls.count() >= 2
    text = " ".join(calls.all_inner_texts())
    # arguments as name/value rows: no JSON object, no engine ids
    assert "{" not in text and "tool_kwargs" not in text and "tool_id" not in text
    tables = page.locator(".compare-arg-table")
    assert tables.count() == calls.locator(".compare-call").count()
    first = tables.first.locator("tr")
    assert first.count() >= 1 and first.first.locator("th").inner_text()
    assert page.locator(".compare-call .tool-name", has_text="y1 = ").count() == 2
    shot(page, artifacts_dir, "readability-compare-coa", full_page=True)
    reasoning.screenshot(path=str(artifacts_dir / "readability-compare-coa-chips.png"))
    page.locator(".compare-step").nth(2).screenshot(
        path=str(artifacts_dir / "readability-compare-coa-arguments.png")
    )
    shots_at_both_sizes(page, artifacts_dir, "readability-compare-coa")
    assert not page.console_errors, page.console_errors


def _bars(page: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate(
        """() => [...document.querySelectorAll('.tl-rows .tl-row')].map(row => ({
            label: row.querySelector('.tl-label').textContent,
            bars: [...row.querySelectorAll('.tl-bar')].map(b => ({
                wait: b.classList.contains('tl-wait'), text: b.textContent,
                decided: b.dataset.decided ?? null, width: b.getBoundingClientRect().width,
                start: Number(b.dataset.start), end: Number(b.dataset.end)}))}))"""
    )
    return found


def test_the_timeline_shows_waiting_for_a_person_as_its_own_span_with_who_decided(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=analyst_rules()), reset_log=True)
    pk = start_notebook(page, live_app, QUESTION, agent="function_calling", mode="step")
    waited = 0
    while True:
        page.wait_for_function(
            "() => document.querySelector('.cell-answer') || "
            "[...document.querySelectorAll('article.cell-step')].some(c => "
            "c.querySelector('button[data-action=approve]:not(:disabled)'))"
        )
        if page.locator(".cell-answer").count():
            break
        waiting = step_cells(page).nth(waited)
        approve = waiting.get_by_role("button", name="Approve and run")
        approve.click()
        waiting.locator(".human-action.action-approved").wait_for()
        approve.wait_for(state="detached")  # it ran: the next wait is another step's
        waited += 1
    page.locator(".cell-answer").wait_for()
    page.goto(f"{live_app.url}/traces/{pk}/")
    page.wait_for_selector("#trace[data-ready='true']")
    rows = _bars(page)
    steps = [r for r in rows if r["label"].startswith("Step")]
    assert len(steps) == waited == 2  # the tool calls, the answer
    for row in steps:
        waits = [b for b in row["bars"] if b["wait"]]
        runs = [b for b in row["bars"] if not b["wait"]]
        assert len(waits) == 1 and len(runs) == 1, row
        wait, run = waits[0], runs[0]
        assert wait["decided"] == f"approved by {USERNAME}", wait
        assert f"waiting for a person · approved by {USERNAME}" in wait["text"]
        # the wait is the blank before the run: it ends where the run starts
        assert wait["end"] == pytest.approx(run["start"], abs=1e-3), row
        assert wait["end"] >= wait["start"]
    # no bar is a sliver: the shortest run (a tool call of a few ms) is still visible
    widths = [b["width"] for r in rows for b in r["bars"] if not b["wait"]]
    assert min(widths) >= 5.9, widths
    page.locator("#timeline").scroll_into_view_if_needed()
    shot(page, artifacts_dir, "readability-timeline-waits")
    shots_at_both_sizes(page, artifacts_dir, "readability-timeline-waits")
    assert not page.console_errors, page.console_errors


def test_an_answer_ending_its_sentence_is_not_given_a_second_full_stop(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=team_rules()), reset_log=True)
    start_notebook(page, live_app, TEAM_PROMPT, agent="team", mode="auto")
    page.get_by_label("Your answer").fill("All regions, please.")
    page.get_by_role("button", name="Send answer").click()
    card = page.locator(".tool-card.status-answered .tool-answered")
    # textContent, not innerText: the answered step may fold away once the turn goes on, and
    # Chromium gives a folded subtree's innerText as ""
    expect(card.first).to_have_text(
        re.compile(r"^Answered: All regions, please\. It ran again"), timeout=30_000
    )
    said = card.first.text_content() or ""
    assert ".." not in said, said
    card.first.evaluate("el => el.scrollIntoView({block: 'center'})")
    shot(page, artifacts_dir, "readability-answered-sentence")


def test_an_input_added_to_an_empty_step_says_added_not_null(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=analyst_rules()), reset_log=True)
    start_notebook(page, live_app, QUESTION, agent="function_calling", mode="step")
    first = step_cells(page).first
    first.get_by_role("button", name="Approve and run").click()
    second = step_cells(page).nth(1)
    field = second.get_by_label("Input for this step")
    field.wait_for()
    assert field.input_value() == ""  # the step had no input of its own
    field.fill("Use whole numbers.")
    second.get_by_role("button", name="Save input").click()
    edit = second.locator(".human-action.action-edited_input")
    edit.wait_for()
    text = edit.inner_text()
    assert "null" not in text.lower(), text
    assert edit.locator(".edit-before").count() == 0
    assert edit.locator(".edit-after .field-label").inner_text().lower() == "added"
    assert "Use whole numbers." in edit.locator(".edit-after").inner_text()
    edit.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "readability-edit-added")
    assert not page.console_errors, page.console_errors


def test_approve_all_waiting_branches_is_offered_once_for_the_fan_out(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=research_rules()), reset_log=True)
    start_notebook(
        page, live_app, RESEARCH_PROMPT, agent="parallel_research", mode="step"
    )
    step_cells(page).first.get_by_role("button", name="Approve and run").click()
    branches = [step_cells(page).nth(i) for i in (1, 2, 3)]
    for branch in branches:
        branch.get_by_role("button", name="Approve and run").wait_for()
    everything = page.get_by_role("button", name="Approve all 3 waiting branches")
    assert everything.count() == 1
    # on the fan-out's first waiting branch, not repeated on the others
    assert (
        branches[0].get_by_role("button", name=re.compile("^Approve all")).count() == 1
    )
    branches[0].scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "readability-branches-approve-all")
    # once one branch ran, the two left are offered together, still once
    branches[0].get_by_role("button", name="Approve and run").click()
    page.get_by_role("button", name="Approve all 2 waiting branches").wait_for()
    assert page.get_by_role("button", name=re.compile("^Approve all")).count() == 1
    page.get_by_role("button", name="Approve all 2 waiting branches").click()
    page.locator(".cell-step").nth(4).get_by_role(
        "button", name="Approve and run"
    ).wait_for()
    assert page.get_by_role("button", name=re.compile("^Approve all")).count() == 0
    assert not page.console_errors, page.console_errors
