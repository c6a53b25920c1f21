"""The notebook uses the whole window (issue 28): a resizable split between cells and steps,
remembered per user; the sticky composer never covers a waiting step's controls; a notebook opens
at its waiting step or where the person left it; the traces table scrolls inside itself.
Screenshots: layout-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    USERNAME,
    WINDOW_SIZES,
    LiveApp,
    _browser_module,
    call_rule,
    live_app,
    new_context,
    page,
    scripted_model,
    settle,
    shot,
    shots_at_both_sizes,
    start_notebook,
    step_cells,
    wait_until,
)

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer

pytestmark = pytest.mark.browser


def page_scrolls_sideways(page: Any) -> bool:
    return bool(
        page.evaluate("() => document.scrollingElement.scrollWidth > innerWidth")
    )


def box(page: Any, selector: str) -> dict[str, float]:
    found: dict[str, float] = page.locator(selector).first.bounding_box()
    return found


def top_cell(page: Any) -> dict[str, Any]:
    """The first cell reaching the top of the window, and where its top is."""
    found: dict[str, Any] = page.evaluate(
        """() => { const c = [...document.querySelectorAll('#cells .cell[id]')]
            .find(c => c.getBoundingClientRect().bottom > 0);
            return c ? {id: c.id, top: Math.round(c.getBoundingClientRect().top)} : {id: '', top: 0}; }"""
    )
    return found


def test_traces_table_scrolls_inside_itself_not_the_page(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    live_app.seed("seed_filler_notebooks", USERNAME, 3, "coa")
    page.goto(f"{live_app.url}/traces/")
    page.locator("#trace-rows tr").first.wait_for()
    for width, height in WINDOW_SIZES:
        page.set_viewport_size({"width": width, "height": height})
        assert not page_scrolls_sideways(page), width
        scroller = page.locator(".table-scroll")
        assert scroller.evaluate("el => el.scrollWidth <= el.clientWidth + 1") or (
            scroller.evaluate("el => getComputedStyle(el).overflowX") == "auto"
        )
        shot(page, artifacts_dir, f"layout-traces-{width}x{height}")
    # narrower than the table: the table scrolls in its panel, the page still does not
    page.set_viewport_size({"width": 900, "height": 800})
    assert not page_scrolls_sideways(page)
    assert page.locator(".table-scroll").evaluate(
        "el => el.scrollWidth > el.clientWidth"
    )


def step_rules() -> list[Rule]:
    return [
        call_rule(0, "multiply", "call_a", {"a": 6, "b": 7}, "First a product."),
        call_rule(1, "add", "call_b", {"a": 42, "b": 1}, "Then a sum."),
        call_rule(2, "multiply", "call_c", {"a": 43, "b": 2}, "One more product."),
        Rule(
            name="answer",
            match=Match(tool_results_since_user=3),
            reply=Reply(text="86."),
        ),
    ]


def controls_clear_of_composer(page: Any, cell: Any) -> None:
    approve = cell.get_by_role("button", name="Approve and run").bounding_box()
    composer = box(page, "#composer")
    assert approve["y"] >= 0, approve
    assert approve["y"] + approve["height"] <= composer["y"], (approve, composer)


def test_a_waiting_step_shows_above_the_composer_and_the_page_opens_at_it(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=step_rules()), reset_log=True)
    start_notebook(
        page,
        live_app,
        "Layout check: a few steps",
        agent="function_calling",
        mode="step",
    )
    for n in range(3):
        cell = step_cells(page).nth(n)
        cell.get_by_role("button", name="Approve and run").wait_for()
        if n < 2:
            cell.get_by_role("button", name="Approve and run").click()
            step_cells(page).nth(n).locator(".tool-card.status-completed").wait_for()
    waiting = step_cells(page).nth(2)
    waiting.get_by_role("button", name="Approve and run").wait_for()

    # from the top of the page, bringing the waiting step into view keeps its controls visible
    page.evaluate("() => window.scrollTo(0, 0)")
    waiting.evaluate("el => window.agentui.landing.reveal(el)")
    controls_clear_of_composer(page, waiting)
    shot(page, artifacts_dir, "layout-waiting-step-1280x800")

    # opening the notebook again goes to the waiting step, whatever the position left
    page.evaluate("() => window.scrollTo(0, 0)")
    page.evaluate("() => window.agentui.landing.save()")
    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    waiting = step_cells(page).nth(2)
    waiting.get_by_role("button", name="Approve and run").wait_for()
    wait_until(
        lambda: page.evaluate("() => window.scrollY") > 0, message="the page moved"
    )
    controls_clear_of_composer(page, waiting)
    shots_at_both_sizes(page, artifacts_dir, "layout-waiting-step-reopened")


def test_the_notebook_uses_the_window_and_its_split_is_remembered(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    task_id = int(live_app.seed("seed_long_trace", USERNAME, 30))
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{live_app.url}/tasks/{task_id}/")
    page.wait_for_selector("#connection[data-state='open']")
    step_cells(page).nth(29).wait_for()
    layout = box(page, ".nb-layout")
    assert layout["width"] > 1700, layout  # no narrow centred column at 1920 px
    assert not page_scrolls_sideways(page)
    shot(page, artifacts_dir, "layout-notebook-wide-1920x1080")

    # drag the bar 200 px to the left: the steps panel is 200 px wider, the cells narrower
    panel = box(page, "#dag-panel")
    handle = box(page, ".split-handle")
    grab_x, grab_y = handle["x"] + handle["width"] / 2, max(handle["y"], 0) + 300
    page.mouse.move(grab_x, grab_y)
    page.mouse.down()
    page.mouse.move(grab_x - 200, grab_y, steps=5)
    page.mouse.up()
    dragged = box(page, "#dag-panel")
    assert abs(dragged["width"] - (panel["width"] + 200)) <= 4, (panel, dragged)

    # the keyboard: ← widens the panel by a step, → narrows it; End makes it smallest
    page.locator(".split-handle").focus()
    page.keyboard.press("ArrowLeft")
    wider = box(page, "#dag-panel")["width"]
    assert abs(wider - dragged["width"] - 16) <= 1
    page.keyboard.press("Shift+ArrowRight")
    assert abs(box(page, "#dag-panel")["width"] - (wider - 96)) <= 1
    chosen = box(page, "#dag-panel")["width"]
    assert page.locator(".split-handle").get_attribute("aria-valuenow") == str(
        round(chosen)
    )

    # remembered for this user: another notebook (here the trace page) opens with it
    stored = page.evaluate(
        f"() => localStorage.getItem('agentui:{USERNAME}:dag-width')"
    )
    assert stored == str(round(chosen))
    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.wait_for_function("() => window.agentui.dag.cy.nodes().length > 0")
    assert abs(box(page, "#dag-panel")["width"] - chosen) <= 1

    # where the person left the notebook: scrolled a third of the way, reopened there
    page.goto(f"{live_app.url}/tasks/{task_id}/")
    page.wait_for_selector("#connection[data-state='open']")
    step_cells(page).nth(29).wait_for()
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.mouse.wheel(0, -1)  # the person takes over from following the end
    page.evaluate(f"() => window.scrollTo(0, {height // 3})")
    key = f"agentui:{USERNAME}:scroll:{task_id}"
    saved = wait_until(
        lambda: (
            (
                s := page.evaluate(
                    f"() => JSON.parse(localStorage.getItem('{key}') || 'null')"
                )
            )
            and s["y"] == page.evaluate("() => window.scrollY")
            and s["anchor"]
            and s
        ),
        message="the position saved",
    )
    left_at = top_cell(page)
    assert left_at["id"] == saved["anchor"] and left_at["id"] != "", left_at
    page.reload()
    page.wait_for_selector("#connection[data-state='open']")
    step_cells(page).nth(29).wait_for()
    # the same cell at the top of the window, as far into it as it was
    back = wait_until(
        lambda: (t := top_cell(page))["id"] == left_at["id"] and t,
        message=f"reopened at {left_at}",
    )
    assert abs(back["top"] - left_at["top"]) <= 2, (back, left_at)
    shots_at_both_sizes(page, artifacts_dir, "layout-notebook-reopened")


PRESETS = [
    (
        "function_calling",
        "FUNCTION_CALLING_PROMPT",
        "function_calling_rules",
        "analyst",
    ),
    ("llm_compiler", "LLM_COMPILER_PROMPT", "llm_compiler_rules", "analyst"),
    ("coa", "COA_PROMPT", "coa_rules", "analyst"),
    ("react", "REACT_PROMPT", "react_rules", "react"),
    ("team", "TEAM_PROMPT", "team_rules", "team"),
    ("parallel_research", "RESEARCH_PROMPT", "research_rules", "research"),
]


@pytest.mark.parametrize(("agent", "prompt", "rules", "module"), PRESETS)
def test_every_presets_notebook_fits_the_window(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    page: Any,
    artifacts_dir: Path,
    agent: str,
    prompt: str,
    rules: str,
    module: str,
) -> None:
    demo = importlib.import_module(f"runs.demo.{module}")
    scripted_model.load(Script(rules=getattr(demo, rules)()), reset_log=True)
    start_notebook(page, live_app, getattr(demo, prompt), agent=agent, mode="auto")
    # the answer, or the team's question to the person
    page.locator(".cell-answer, .team-question").first.wait_for(timeout=30_000)
    for width, height in WINDOW_SIZES:
        page.set_viewport_size({"width": width, "height": height})
        settle(page)
        assert not page_scrolls_sideways(page), (agent, width)
        layout = box(page, ".nb-layout")
        assert layout["width"] >= width - 80, (agent, width, layout)
        shot(page, artifacts_dir, f"layout-preset-{agent}-{width}x{height}")
    page.set_viewport_size({"width": 1280, "height": 800})
    assert page.console_errors == []
