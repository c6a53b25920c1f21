"""One way to show dates, numbers and names on every page (issue 28): relative times with the
full date in a tooltip, numbers rounded for reading with the exact value one click away, agent
names instead of slugs, plain first lines in the traces list, and a favicon.
Screenshots: consistency-*.png at 1280x800 and 1920x1080."""

from __future__ import annotations

import re
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
)

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer

pytestmark = pytest.mark.browser


QUESTION = "Consistency check: what is 12668.25 with 8% tax?"
FLOAT_SQL = "SELECT CAST(0.1 AS DOUBLE) + CAST(0.2 AS DOUBLE) AS total, 2024 AS year"
ANSWER = (
    "## Tax **added**: `13,681.71`\n\nThe [details](https://example.com) are above."
)
RELATIVE = re.compile(r"just now|ago|in \d|yesterday|today", re.I)


def rules() -> list[Rule]:
    return [
        call_rule(0, "multiply", "call_tax", {"a": 12668.25, "b": 1.08}),
        call_rule(1, "sql_query", "call_float", {"sql": FLOAT_SQL}),
        Rule(
            name="answer",
            match=Match(tool_results_since_user=2),
            reply=Reply(text=ANSWER),
        ),
    ]


def times(page: Any) -> list[dict[str, str]]:
    found: list[dict[str, str]] = page.evaluate(
        """() => [...document.querySelectorAll('time')].map(t => ({
            datetime: t.getAttribute('datetime') || '', text: t.textContent.trim(), title: t.title}))"""
    )
    return found


def assert_relative_times(page: Any, at_least: int) -> None:
    found = times(page)
    assert len(found) >= at_least, found
    for t in found:
        assert t["datetime"] and RELATIVE.search(t["text"]), t
        assert re.search(r"\d{4}", t["title"]), (
            t
        )  # the full date, with its year, in the tooltip


def assert_step_times(page: Any) -> None:
    """Each step card's head has a relative time of when it ran, its full date on hover."""
    cells = page.locator("article.cell-step")
    whens = cells.locator(".cell-meta time[data-when]")
    assert cells.count() >= 3 and whens.count() == cells.count()
    for when in whens.all():
        assert RELATIVE.search(when.inner_text()), when.inner_text()
        assert re.search(r"\d{4}", when.get_attribute("title") or "")


def test_start_page_shows_agent_names_and_has_a_favicon(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    page.goto(f"{live_app.url}/")
    badges = page.locator(".examples .badge").all_inner_texts()
    assert "Chain of Abstraction" in badges and "Function calling" in badges, badges
    assert not {"coa", "function_calling", "llm_compiler"} & set(badges), badges
    icon = page.locator("link[rel=icon]").get_attribute("href")
    assert icon and icon.endswith(".svg")
    response = page.request.get(f"{live_app.url}{icon}")
    assert response.ok and "svg" in response.headers["content-type"]
    shots_at_both_sizes(page, artifacts_dir, "consistency-start")

    page.goto(f"{live_app.url}/new/")
    page.get_by_text("Example prompts").click()
    badges = page.locator(".examples .badge").all_inner_texts()
    assert "Chain of Abstraction" in badges and "coa" not in badges, badges
    assert page.console_errors == []


def test_numbers_dates_and_first_lines_read_the_same_everywhere(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(Script(rules=rules()), reset_log=True)
    pk = start_notebook(page, live_app, QUESTION, agent="function_calling", mode="auto")
    page.locator(".cell-answer").wait_for()

    # a tool's number is rounded; a click shows the exact value, another click rounds it again
    number = page.locator(".tool-card", has_text="multiply").locator(".number-view")
    assert number.inner_text() == "13,681.71"
    assert "13681.710000000001" in (number.get_attribute("title") or "")
    number.click()
    assert number.inner_text() == "13681.710000000001"
    number.click()
    assert number.inner_text() == "13,681.71"

    # a table's numbers too (the exact value in the tooltip); a year stays a year
    table = page.locator(".tool-card", has_text="sql_query").locator("table")
    table.locator("tbody td").first.wait_for()
    total, year = table.locator("tbody td").all()
    assert (
        total.inner_text() == "0.3"
        and total.get_attribute("title") == "0.30000000000000004"
    )
    assert year.inner_text() == "2024"
    # every step card says when it ran, as every date reads
    assert_step_times(page)
    shots_at_both_sizes(page, artifacts_dir, "consistency-notebook")

    # the traces list: the answer's first line as plain words, the time relative with the date
    page.goto(f"{live_app.url}/traces/")
    row = page.locator(f"#trace-rows tr[data-task-id='{pk}']")
    row.wait_for()
    assert row.locator(".trace-answer").inner_text() == "Tax added: 13,681.71"
    assert_relative_times(page, 1)
    shots_at_both_sizes(page, artifacts_dir, "consistency-traces")

    # the trace and the new-notebook page's recent list: the same relative times
    page.goto(f"{live_app.url}/traces/{pk}/")
    page.locator("#timeline .tl-step").first.wait_for()
    assert_relative_times(page, 1)
    assert_step_times(page)
    number = page.locator(".tool-card", has_text="multiply").locator(".number-view")
    assert number.inner_text() == "13,681.71"
    shots_at_both_sizes(page, artifacts_dir, "consistency-trace")

    page.goto(f"{live_app.url}/new/")
    assert_relative_times(page, 1)
    assert page.console_errors == []


def test_the_other_pages_fit_the_window_and_say_dates_the_same_way(
    live_app: LiveApp, page: Any, artifacts_dir: Path
) -> None:
    page.goto(f"{live_app.url}/settings/tokens/")
    page.get_by_label("Name").fill("layout check")
    page.get_by_role("button", name="Create token").click()
    page.locator("tr[data-token-id]").first.wait_for()
    page.goto(f"{live_app.url}/settings/tokens/")
    assert_relative_times(page, 1)  # the token's creation
    shots_at_both_sizes(page, artifacts_dir, "consistency-api-tokens")

    a = int(live_app.seed("seed_long_trace", USERNAME, 3))
    b = int(live_app.seed("seed_long_trace", USERNAME, 4))
    pages = {
        "data": "/data/",
        "compare": f"/traces/compare/?a={a}&b={b}",
        "start": "/",
    }
    for name, path in pages.items():
        page.goto(f"{live_app.url}{path}")
        page.wait_for_load_state("networkidle")
        for width, height in WINDOW_SIZES:
            page.set_viewport_size({"width": width, "height": height})
            assert page.evaluate(
                "() => document.scrollingElement.scrollWidth <= innerWidth"
            ), (name, width)
        shots_at_both_sizes(page, artifacts_dir, f"consistency-page-{name}")
    assert page.console_errors == []
