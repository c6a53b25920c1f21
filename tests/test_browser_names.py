"""Names are never cut off without a way to read them (issue 28): tool names in cards side by
side, agent, table and preset names, at 1280x800 and 1920x1080. A name either fits, wraps, or
(in a single-line list) shows whole in its tooltip.

Screenshots: names-*.png at both sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    WINDOW_SIZES,
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    scripted_model,
    settle,
    shots_at_both_sizes,
    start_notebook,
)

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

pytestmark = pytest.mark.browser

# Three calls of one step: their cards stand side by side (three columns at 1920 wide).
CALLS = [
    ToolCallSpec(
        name="describe_data_table", id="c1", arguments={"name": "shop_visits"}
    ),
    ToolCallSpec(name="describe_table", id="c2", arguments={"name": "sales"}),
    ToolCallSpec(name="list_tables", id="c3", arguments={}),
]

# A notebook's title longer than its toolbar's line: cut there, whole in the tooltip.
QUESTION = (
    "What tables are there in the sample database, and which of them holds the sales with"
    " their cities, products and the revenue of every month since the first of January?"
)

# Elements that hold a name; none may be cut unless its tooltip says the whole of it.
NAMES = ".tool-name, .badge, .tl-label, h1, .trace-title a, .trace-answer, .result-table th, td"

CUT_NAMES = """(selector) => [...document.querySelectorAll(selector)]
    .filter((el) => el.getClientRects().length)
    .filter((el) => el.scrollWidth > el.clientWidth + 1)
    .filter((el) => ![el, el.closest('[title]'), el.querySelector('[title]')]
        .some((t) => t && t.title.includes(el.textContent.trim())))
    .map((el) => `${el.className}: ${el.textContent.trim()}`)"""


def cut_names(page: Any) -> list[str]:
    """The names on the page that are cut off with no tooltip holding them, at both sizes."""
    found: list[str] = []
    for width, height in WINDOW_SIZES:
        page.set_viewport_size({"width": width, "height": height})
        settle(page)
        found += [f"{width}: {n}" for n in page.evaluate(CUT_NAMES, NAMES)]
    return found


def test_tool_names_in_cards_side_by_side_are_never_cut(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(
        Script(
            rules=[
                Rule(
                    name="three",
                    match=Match(tool_results_since_user=0),
                    reply=Reply(text="Looking at the tables.", tool_calls=CALLS),
                ),
                Rule(name="answer", reply=Reply(text="Three tables.")),
            ]
        ),
        reset_log=True,
    )
    pk = start_notebook(
        page, live_app, QUESTION, agent="function_calling", mode="tools"
    )
    waiting = page.locator(".tool-card.editable")
    waiting.nth(2).wait_for()
    page.set_viewport_size({"width": 1920, "height": 1080})
    settle(page)
    tops = {round(waiting.nth(i).bounding_box()["y"]) for i in range(3)}
    assert len(tops) == 1, tops  # the three cards stand in one row
    assert cut_names(page) == []
    waiting.first.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "names-calls-waiting")

    page.get_by_role("button", name="Approve and run").first.click()
    page.locator(".cell-answer").wait_for()
    cards = page.locator(".tool-card", has=page.locator(".badge.status-completed"))
    cards.nth(1).wait_for()
    assert cut_names(page) == []
    page.locator(".tool-card").first.scroll_into_view_if_needed()
    shots_at_both_sizes(page, artifacts_dir, "names-calls-done")

    heading = page.locator("#notebook-title")
    title = heading.get_attribute("title") or ""
    assert title == heading.text_content() and QUESTION.startswith(title.rstrip("…"))
    # one line, cut with an ellipsis when the toolbar leaves it too little room (how much room
    # depends on the toolbar's contents: the tooltip above holds the whole title either way)
    style = heading.evaluate(
        "h => { const s = getComputedStyle(h); return [s.whiteSpace, s.textOverflow,"
        " Math.round(h.getBoundingClientRect().height / parseFloat(s.lineHeight))]; }"
    )
    assert style == ["nowrap", "ellipsis", 1], style

    page.goto(f"{live_app.url}/traces/{pk}/")
    page.locator("#timeline .tl-step").first.wait_for()
    assert cut_names(page) == []
    shots_at_both_sizes(page, artifacts_dir, "names-trace")

    page.goto(f"{live_app.url}/traces/")
    page.locator(f"#trace-rows tr[data-task-id='{pk}']").wait_for()
    assert cut_names(page) == []
    shots_at_both_sizes(page, artifacts_dir, "names-traces")
    assert page.console_errors == []
