"""Rendered results in Chromium: Markdown answers (and hostile ones), result tables, charts.

Screenshots go to test-artifacts/render-*.png.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from browser_helpers import (  # noqa: F401  (fixtures)
    LiveApp,
    _browser_module,
    live_app,
    new_context,
    page,
    scripted_model,
    shot,
    start_notebook,
    wait_until,
)

from runs.engine.testing import Reply, Rule, Script, ScriptedServer, Timing

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
    assert link.get_attribute("target") == "_blank"
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
    outside: list[str] = []
    page.on(
        "request",
        lambda r: (
            None
            if urlparse(r.url).hostname in ("127.0.0.1", "localhost")
            else outside.append(r.url)
        ),
    )
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
