"""A chart built to freeze the page is not drawn, and the notebook stays usable (Chromium).

A chart spec is model output, and Vega-Lite can be made to build far more than its data: an
expression's `sequence(0, 3e7)` flattened into rows, an axis asking for 10⁸ ticks, a width of
10⁹ pixels (an axis's default tick count follows it), a regular expression that backtracks for
minutes. Drawn in the page's thread, each froze the notebook for a minute and then crashed its
tab, again after every reload. The server refuses the counts and sizes (tests/test_tools_chart.py);
these specs are stored as a tool that did not check them would have, so the page's own defence is
what is tested: counts and sizes capped (static/js/render/chart_limits.js) and every chart run
first off the page within a time budget (chart_worker.js). Each card says why its chart was not
drawn; the page answers throughout; an ordinary chart still draws.

Screenshots: test-artifacts/chart-trap-*.png.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    scripted_model,
    shots_at_both_sizes,
    start_notebook,
)
from test_browser_hostile import BAR, chart_cards, csp_reports, seeded, watched

from runs.demo.charts import TRAP_CHART_PROMPT, trap_chart_rules
from runs.engine.testing import Script, ScriptedServer

pytestmark = pytest.mark.browser

ONE_ROW = {"values": [{"s": "a" * 40 + "!", "v": 1}]}
TRAPS = {
    "sequence": (
        {
            "data": ONE_ROW,
            "transform": [
                {"calculate": "sequence(0, 30000000)", "as": "n"},
                {"flatten": ["n"]},
            ],
            "mark": "point",
            "encoding": {"x": {"field": "n", "type": "quantitative"}},
        },
        "The chart could not be drawn: a chart may build at most 10,000 items in a sequence "
        "(asked for 30000000)",
    ),
    "ticks": (
        {
            "data": ONE_ROW,
            "mark": "point",
            "encoding": {
                "x": {"field": "v", "type": "quantitative", "axis": {"tickCount": 1e8}}
            },
        },
        "The chart was not drawn: 'tickCount' is 100000000, more than a chart may ask "
        "for (at most 500).",
    ),
    "width": (
        {
            "data": ONE_ROW,
            "width": 1e9,
            "mark": "point",
            "encoding": {"x": {"field": "v", "type": "quantitative"}},
        },
        "The chart was not drawn: 'width' is 1000000000, more than a chart may ask for "
        "(at most 10000).",
    ),
    "backtracking": (
        {
            "data": ONE_ROW,
            "transform": [
                {"calculate": "test(regexp('^(a+)+$'), datum.s) ? 1 : 0", "as": "t"}
            ],
            "mark": "point",
            "encoding": {"x": {"field": "t", "type": "quantitative"}},
        },
        "The chart was not drawn: drawing it took more than 4 s, as a chart built to "
        "freeze the page would.",
    ),
}


def responsive(page: Any) -> float:
    """Seconds the page took to answer a script call (a frozen page answers late or never)."""
    started = time.monotonic()
    assert page.evaluate("() => 1 + 1") == 2
    return time.monotonic() - started


@pytest.mark.parametrize("trap", list(TRAPS))
def test_a_chart_built_to_freeze_the_page_is_not_drawn(
    trap: str,
    live_app: LiveApp,
    new_context: Callable[..., Any],
    artifacts_dir: Path,
) -> None:
    spec, status = TRAPS[trap]
    task_id = seeded(live_app, spec)
    page, watch = watched(new_context, live_app)
    for _ in range(2):  # and again after a reload
        page.goto(f"{live_app.url}/tasks/{task_id}/")
        page.wait_for_selector("#connection[data-state='open']")
        chart = chart_cards(page, "h1").first.locator(".result-chart")
        chart.scroll_into_view_if_needed()
        chart.locator("xpath=self::*[@data-state='failed']").wait_for(timeout=30_000)
        assert chart.locator(".chart-status").inner_text() == status
        assert responsive(page) < 1.0
        watch.check(page)
    if trap == "backtracking":
        shots_at_both_sizes(page, artifacts_dir, "chart-trap")
    # an ordinary chart still draws, after the trap's worker was stopped
    page.goto(f"{live_app.url}/tasks/{seeded(live_app, BAR)}/")
    chart = chart_cards(page, "h1").first.locator(".result-chart")
    chart.locator("xpath=self::*[@data-state='drawn']").wait_for(timeout=30_000)
    assert chart.locator("svg .mark-rect path").count() == len(BAR["data"]["values"])
    assert page.console == []  # type: ignore[attr-defined]
    assert csp_reports(live_app) == []


def test_the_demo_trap_chart_is_stopped_and_says_why(
    live_app: LiveApp,
    scripted_model: ScriptedServer,
    new_context: Callable[..., Any],
) -> None:
    """The offline demo's example (runs/demo/charts.py): the tool accepts the chart (a pattern
    is not something it can judge), the page does not draw it."""
    scripted_model.load(Script(rules=trap_chart_rules()), reset_log=True)
    page, watch = watched(new_context, live_app)
    start_notebook(
        page, live_app, TRAP_CHART_PROMPT, agent="function_calling", mode="auto"
    )
    page.locator(".cell-answer").wait_for()
    chart = page.locator(".tool-card .result-chart").first
    chart.locator("xpath=self::*[@data-state='failed']").wait_for(timeout=30_000)
    assert "drawing it took more than 4 s" in chart.inner_text()
    assert responsive(page) < 1.0
    watch.check(page)
