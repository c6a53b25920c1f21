"""The notebook page at 1280x800 (issue 48): the DAG frames the whole graph unless the person
moved it, the sticky composer covers no waiting step's controls, rejected calls read in one
colour, and stopped steps count in the traces list. Screenshots: test-artifacts/fit-*.png.
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
    start_from_example,
    step_cells,
    wait_until,
)
from dag_helpers import dag_shots
from test_browser_coa import waiting_cell

from runs.demo.analyst import COA_PROMPT, coa_rules
from runs.demo.research import RESEARCH_PROMPT, research_rules
from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser

# After every draw, from the page's first: is the whole graph inside the view? (an init script:
# it wraps the DAG as the page's module hands it to `window.agentui`)
WATCH_FIT = """(() => {
    let agentui;
    window.fitLog = [];
    window.wholeInView = () => {
        const cy = agentui.dag.cy, v = cy.extent();
        const b = cy.elements().boundingBox({includeLabels: false, includeOverlays: false});
        return b.x1 >= v.x1 - 1 && b.x2 <= v.x2 + 1 && b.y1 >= v.y1 - 1 && b.y2 <= v.y2 + 1;
    };
    Object.defineProperty(window, "agentui", {
        configurable: true,
        get: () => agentui,
        set: (value) => {
            agentui = value;
            const dag = value.dag, draw = dag.draw.bind(dag);
            dag.draw = (graph) => {
                const n = draw(graph);
                window.fitLog.push({count: n, whole: window.wholeInView()});
                return n;
            };
        },
    });
})()"""


def whole_in_view(page: Any) -> bool:
    return bool(page.evaluate("() => window.wholeInView()"))


def start_example(page: Any, app: LiveApp, prompt: str, agent: str, mode: str) -> None:
    """Start an example prompt's notebook with the page's fits recorded (`window.fitLog`)."""
    page.context.add_init_script(WATCH_FIT)
    start_from_example(page, app, prompt, agent=agent, mode=mode)


def drag_canvas(page: Any, dx: float, dy: float) -> None:
    """Pan the graph by hand: press on the canvas's empty top-left corner and drag."""
    box = page.locator("#dag .dag-canvas").bounding_box()
    x, y = box["x"] + 8, box["y"] + 8
    page.mouse.move(x, y)
    page.mouse.down()
    for k in range(1, 6):
        page.mouse.move(x + dx * k / 5, y + dy * k / 5)
    page.mouse.up()


def pan(page: Any) -> dict[str, float]:
    found: dict[str, float] = page.evaluate("() => window.agentui.dag.cy.pan()")
    return found


def test_the_dag_fits_parallel_research_on_every_new_node_until_the_person_pans(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=research_rules()), reset_log=True)
    start_example(page, live_app, RESEARCH_PROMPT, "parallel_research", "step")
    step_cells(page).first.get_by_role("button", name="Approve and run").click()
    page.wait_for_function(
        "() => document.querySelectorAll('article.cell-step').length === 5"
    )
    page.wait_for_function("() => window.agentui.dag.count === 6")
    # the message, the split, three branches and the synthesis: all of them, at every draw
    log = page.evaluate("() => window.fitLog")
    assert [e["count"] for e in log][-1] == 6 and log[0]["count"] < 6, log
    assert all(entry["whole"] for entry in log), log
    dag_shots(page, artifacts_dir, "fit-dag-research")

    # Panned by hand, the view stays where the person put it as steps run and nodes change.
    drag_canvas(page, 40, 60)
    moved = pan(page)
    assert not whole_in_view(page)
    step_cells(page).nth(1).get_by_role("button", name="Approve and run").click()
    wait_until(
        lambda: len(scripted_model.requests) == 2, message="the first branch ran"
    )
    step_cells(page).nth(1).get_by_role("button", name="Undo this step").wait_for()
    assert page.evaluate("() => window.fitLog.length") > len(log)
    assert pan(page) == moved

    # Fit frames the whole graph and follows it again.
    page.get_by_role("button", name="Fit").click()
    assert whole_in_view(page)
    drawn = page.evaluate("() => window.fitLog.length")
    step_cells(page).nth(2).get_by_role("button", name="Approve and run").click()
    step_cells(page).nth(2).get_by_role("button", name="Undo this step").wait_for()
    assert page.evaluate("() => window.fitLog.length") > drawn
    assert whole_in_view(page)
    assert not page.console_errors, page.console_errors


# Every waiting step's Approve button: is it the element at its own centre, with the window
# scrolled so the button sits at its foot (where a sticky composer would lie over it)?
APPROVE_UNCOVERED = """() => [...document.querySelectorAll('article.cell-step [data-action=approve]')]
    .filter((b) => b.offsetParent !== null)
    .map((button) => {
        const before = button.getBoundingClientRect();
        window.scrollBy(0, before.bottom - (window.innerHeight - 4));
        const r = button.getBoundingClientRect();
        const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
        return {step: button.closest('article').id, clear: button === hit || button.contains(hit),
                over: hit ? (hit.id || hit.className) : null};
    })"""


def test_a_fork_of_parallel_research_fits_and_its_waiting_branches_are_not_covered(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=research_rules()), reset_log=True)
    start_example(page, live_app, RESEARCH_PROMPT, "parallel_research", "auto")
    page.locator(".cell-answer").wait_for(timeout=30_000)
    source = page.url
    step_cells(page).first.get_by_role("button", name="Fork here").click()
    page.wait_for_url(lambda url: url != source and "/tasks/" in url)
    page.wait_for_selector("#connection[data-state='open']")
    waiting = step_cells(page).nth(1).get_by_role("button", name="Approve and run")
    waiting.wait_for()
    page.wait_for_function(
        "() => !document.querySelector('article.cell-step [data-action=approve]').disabled"
    )
    # the page opens at the waiting branch, its Approve button in view and on top
    box = waiting.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 800, box
    assert waiting.evaluate(
        """(b) => { const r = b.getBoundingClientRect();
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return b === hit || b.contains(hit); }"""
    )
    shots_at_both_sizes(page, artifacts_dir, "fit-fork-research-waiting")
    found = page.evaluate(APPROVE_UNCOVERED)
    assert len(found) >= 3 and all(f["clear"] for f in found), found
    assert whole_in_view(page)
    dag_shots(page, artifacts_dir, "fit-dag-fork-research")
    assert not page.console_errors, page.console_errors


def test_the_dag_fits_the_chain_of_abstraction(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=coa_rules()), reset_log=True)
    start_example(page, live_app, COA_PROMPT, "coa", "auto")
    page.locator(".cell-answer").wait_for(timeout=30_000)
    log = page.evaluate("() => window.fitLog")
    assert log and all(entry["whole"] for entry in log), log
    assert whole_in_view(page)
    calls = page.evaluate(
        "() => window.agentui.dag.snapshot().nodes.filter((n) => n.kind === 'call').length"
    )
    assert calls == 7
    dag_shots(page, artifacts_dir, "fit-dag-coa")


def slow_branches() -> list[Any]:
    """The demo's research script with branches that stream slowly enough to stop part way."""
    return [
        r.model_copy(
            update={"timing": r.timing.model_copy(update={"token_delay_s": 0.3})}
        )
        if r.timing is not None and r.timing.ttft_s == 1.0
        else r
        for r in research_rules()
    ]


def test_a_stopped_parallel_run_counts_every_branch_that_ran_in_the_traces_list(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=slow_branches()), reset_log=True)
    start_example(page, live_app, RESEARCH_PROMPT, "parallel_research", "auto")
    # the split answered and the three branches are streaming: Stop
    page.wait_for_function(
        """() => [...document.querySelectorAll('article.cell-step .stream-text')]
            .filter((e) => e.textContent.trim()).length >= 4"""
    )
    page.locator("#abandon-button").click()
    page.get_by_role("button", name="Stop the turn").click()
    page.wait_for_function(
        "() => document.querySelectorAll('article.cell-step[data-status=interrupted]').length === 3"
    )
    cards = step_cells(page)
    ran = [
        cards.nth(i).get_attribute("data-status")
        for i in range(cards.count())
        if cards.nth(i).get_attribute("data-status") in ("completed", "interrupted")
    ]
    assert ran.count("interrupted") == 3, ran
    # the tokens the cards show (the split's call; a stream cut off part way reports none)
    shown = page.evaluate(
        """() => [...document.querySelectorAll('article.cell-step .cell-meta')]
            .map((m) => (m.textContent.match(/([\\d,]+) tokens?/) || [0, '0'])[1])
            .reduce((sum, n) => sum + Number(n.replace(/,/g, '')), 0)"""
    )
    assert shown > 0

    page.goto(f"{live_app.url}/traces/")
    row = page.locator("#trace-rows tr[data-task-id]").first
    row.wait_for()
    assert "stopped" in row.locator("td", has_text="stopped").first.inner_text()
    assert row.locator("td[data-col='steps']").inner_text() == str(len(ran))
    assert row.locator("td[data-col='tokens']").inner_text() == f"{shown:,}"
    shots_at_both_sizes(page, artifacts_dir, "fit-traces-stopped")
    assert not page.console_errors, page.console_errors


def test_the_traces_table_fits_its_panel_at_1280(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=research_rules()), reset_log=True)
    start_example(page, live_app, RESEARCH_PROMPT, "parallel_research", "auto")
    page.locator(".cell-answer").wait_for(timeout=30_000)
    page.goto(f"{live_app.url}/traces/")
    page.locator("#trace-rows tr[data-task-id] .trace-answer").first.wait_for()
    fit = page.evaluate(
        """() => { const box = document.querySelector('.table-scroll');
            const right = box.getBoundingClientRect().right;
            return {scroll: box.scrollWidth, client: box.clientWidth, panel: box.closest('.panel').offsetWidth,
                    outside: [...document.querySelectorAll('table.traces th, #trace-rows tr:first-child td')]
                        .filter((c) => c.getBoundingClientRect().right > right + 0.5)
                        .map((c) => c.textContent.slice(0, 20))}; }"""
    )
    assert 1200 <= fit["panel"] <= 1240, fit  # the page's panel at 1280 wide
    assert fit["scroll"] <= fit["client"] and not fit["outside"], fit
    # nothing in the headers or the figures is cut short
    cut = page.evaluate(
        """() => [...document.querySelectorAll('table.traces th, #trace-rows td.num')]
            .filter((c) => c.scrollWidth > c.clientWidth).map((c) => c.textContent)"""
    )
    assert not cut, cut
    headers = page.locator("table.traces th").all_inner_texts()
    for name in (
        "Steps",
        "Tool calls",
        "Tokens",
        "Cost",
        "Wall time",
        "Human actions",
        "Updated",
    ):
        assert any(h.replace("\n", " ").lower() == name.lower() for h in headers), (
            headers
        )
    # the answer's first line is cut short in its column, and said in full on hover
    answer = page.locator("#trace-rows .trace-answer").first
    assert answer.evaluate("(a) => a.scrollWidth > a.clientWidth")
    assert answer.get_attribute("title").startswith(
        answer.inner_text().rstrip("…")[:20]
    )
    shots_at_both_sizes(page, artifacts_dir, "fit-traces-table")
    assert not page.console_errors, page.console_errors


# The colours a rejected call is drawn in: its card's dot and badge, the decision badge, the
# chain's chip, the DAG node's border and the DAG legend's entry (as rgb numbers).
REJECTED_COLOURS = """(output) => {
    const rgb = (c) => (c.match(/[\\d.]+/g) || []).slice(0, 3).map(Number).join(',');
    const card = [...document.querySelectorAll(`.tool-card[data-tool-id$='-${output}']`)].at(-1);
    const chip = document.querySelector(`.chain-chip[data-output='${output}']`);
    const node = window.agentui.dag.cy.nodes().filter((n) => n.data('sub') === output)[0];
    const legend = [...document.querySelectorAll('#dag-panel .legend > span')]
        .find((s) => s.textContent.trim() === 'rejected');
    const colour = (el, prop) => el ? rgb(getComputedStyle(el)[prop]) : null;
    return {
        dot: colour(card.querySelector('.status-dot'), 'backgroundColor'),
        badge: colour(card.querySelector('.tool-head .badge.status'), 'color'),
        chip: colour(chip, 'borderTopColor'),
        node: rgb(node.style('border-color')),
        legend: legend ? colour(legend.querySelector('.status-dot'), 'backgroundColor') : null,
        nodeClasses: node.classes().join(' '),
    };
}"""


def test_a_rejected_call_reads_in_one_colour_and_the_dag_legend_names_it(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=coa_rules()), reset_log=True)
    start_example(page, live_app, COA_PROMPT, "coa", "tools")
    waiting_cell(page, 1).get_by_role("button", name="Approve and run").click()
    calls_step = waiting_cell(page, 2)
    y6 = calls_step.locator(".tool-card.editable[data-tool-id$='-y6']")
    y6.get_by_label("Reason to reject").fill("skip the 2023 average")
    y6.get_by_role("button", name="Reject call").click()
    y6.locator(".decision-rejected").wait_for()
    decided = y6.locator(".decision-rejected").evaluate(
        "(b) => (getComputedStyle(b).color.match(/[\\d.]+/g) || []).slice(0, 3).join(',')"
    )
    calls_step.get_by_role("button", name="Approve and run").click()
    waiting_cell(page, 3).get_by_role("button", name="Approve and run").click()
    page.locator(".cell-answer").wait_for(timeout=20_000)
    found = page.evaluate(REJECTED_COLOURS, "y6")
    assert "status-rejected" in found.pop("nodeClasses")
    assert found["legend"] is not None, "the DAG legend names rejected calls"
    assert len(set(found.values()) | {decided}) == 1, (found, decided)
    shots_at_both_sizes(page, artifacts_dir, "fit-rejected-colour")
    dag_shots(page, artifacts_dir, "fit-dag-rejected")
    assert not page.console_errors, page.console_errors


SEED_PRESET = """
from django.contrib.auth import get_user_model
from runs.service import save_user_preset
user = get_user_model().objects.get(username="analyst")
config = {"agent": "function_calling", "mode": "step", "tools": ["add"]}
print(save_user_preset(user, "Quick sums", config)["id"])
"""


def start_buttons(page: Any) -> list[str]:
    found: list[str] = page.evaluate(
        """() => [...document.querySelectorAll('#new-notebook button')]
            .filter((b) => b.offsetParent !== null && /^start/i.test(b.textContent.trim()))
            .map((b) => b.textContent.trim())"""
    )
    return found


def test_one_start_button_and_a_chosen_preset_greys_out_the_picks_it_sets(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    live_app.shell(SEED_PRESET)
    page.goto(f"{live_app.url}/new/")
    page.locator("#my-presets").wait_for()
    assert start_buttons(page) == ["Start"]
    agent, mode = page.get_by_label("Agent"), page.get_by_label("Approval")
    page.locator("#compose > summary").click()
    tool = page.locator("#compose").get_by_label("add", exact=True)

    page.get_by_role("button", name="Use Quick sums").click()
    assert start_buttons(page) == ["Start with Quick sums"]
    note = page.locator("#preset-chosen")
    assert note.is_visible() and "Quick sums" in note.inner_text()
    assert "greyed out" in note.inner_text()
    # the preset's picks are on the form, and none can be changed to be dropped silently
    assert agent.input_value() == "function_calling" and agent.is_disabled()
    assert mode.input_value() == "step" and mode.is_disabled()
    assert tool.is_checked() and tool.is_disabled()
    assert "preset-chosen" in (agent.get_attribute("aria-describedby") or "")
    shots_at_both_sizes(page, artifacts_dir, "fit-new-notebook-preset-chosen")

    # given back: the picks are the person's again
    page.get_by_role("button", name="Use my own picks instead").click()
    assert start_buttons(page) == ["Start"] and not note.is_visible()
    assert agent.is_enabled() and mode.is_enabled() and tool.is_enabled()

    page.get_by_role("button", name="Use Quick sums").click()
    page.get_by_label("Message").fill("Add 2 and 3")
    page.get_by_role("button", name="Start with Quick sums").click()
    page.wait_for_url("**/tasks/*/")
    newest = live_app.task_rows()[0]
    assert (newest["agent"], newest["mode"]) == ("function_calling", "step")
    assert not page.console_errors, page.console_errors
