"""Rendering benchmarks in Chromium (Playwright): Markdown streaming, and a trace full of results.

    PYTHONPATH=.:tests .venv/bin/python bench/bench_render.py            # both, ~1 min
    PYTHONPATH=.:tests .venv/bin/python bench/bench_render.py stream     # only the Markdown stream
    PYTHONPATH=.:tests .venv/bin/python bench/bench_render.py trace      # only the trace

stream: a 5,000-token Markdown answer (headings, paragraphs, lists, GitHub tables, fenced code)
is fed to the page's renderer (static/js/render/markdown.js) one token at a time, as the
notebook does while a reply streams; each update is timed with the style/layout it causes. The
same text drawn whole per token is timed for comparison. Served from this checkout with
cross-origin isolation, so performance.now() resolves to 5 microseconds.

trace: a finished notebook of 500 steps with 50 SQL result tables (200 rows each), 10 charts and
Markdown step texts, seeded into a fresh database as the publisher stores events (by the browser
tests' `seed_long_trace`, tests/browser_helpers.py), opened in the
trace view three times: time from navigation until the page is drawn (DAG, timeline, totals, all
cells; tables, charts and Markdown are drawn as they come near the viewport), then each chart's
time from scrolling to it until its marks are drawn.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOKEN = re.compile(r"\S+\s*|\s+")  # as the scripted server splits replies
STREAM_TOKENS = 5000
TRACE_STEPS = 500
TRACE_TABLES = 50
TRACE_CHARTS = 10


# --- the Markdown stream -------------------------------------------------------------------------


def markdown_answer(tokens: int) -> list[str]:
    """A Markdown answer of about `tokens` tokens, split as the scripted server streams it."""
    parts: list[str] = []
    n = 0
    while len(TOKEN.findall("".join(parts))) < tokens:
        n += 1
        rows = "\n".join(
            f"| City {n}-{r} | {r * 1234.5:,.2f} | {r * 3} | {'yes' if r % 2 else 'no'} |"
            for r in range(12)
        )
        parts.append(
            f"## Section {n}: revenue by city\n\n"
            f"The **{n}th** slice of the data shows a *steady* rise; see [the notes](https://example.org/{n}) "
            "and the table below. Numbers are rounded to cents, and `NULL` values were left out of the sums.\n\n"
            f"- {n} regions were compared\n- the top city grew by {n % 7 + 2}%\n- two outliers were checked by hand\n\n"
            f"| city | revenue | orders | repeat |\n| :--- | ---: | ---: | :---: |\n{rows}\n\n"
            "```sql\nSELECT c.name, ROUND(SUM(s.revenue), 2) AS revenue\nFROM sales s JOIN cities c ON c.id = s.city_id\n"
            f"WHERE s.sold_on LIKE '2024-{n % 12 + 1:02d}%'\nGROUP BY c.name ORDER BY revenue DESC;\n```\n\n"
            "> Revenue is net of returns; tax is not included.\n\n"
        )
    return TOKEN.findall("".join(parts))[:tokens]


class _IsolatedHandler(SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(times: list[float]) -> dict[str, float]:
    return {
        "tokens": len(times),
        "mean_ms": statistics.fmean(times),
        "p50_ms": _pct(times, 0.50),
        "p99_ms": _pct(times, 0.99),
        "max_ms": max(times),
        "total_ms": sum(times),
    }


def bench_stream(browser: Any, runs: int = 5) -> dict[str, Any]:
    tokens = markdown_answer(STREAM_TOKENS)
    handler = functools.partial(_IsolatedHandler, directory=str(ROOT))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = browser.new_page()
        page.goto(
            f"http://127.0.0.1:{server.server_address[1]}/bench/render_stream.html"
        )
        page.wait_for_function("window.harnessReady === true")
        assert page.evaluate("crossOriginIsolated"), (
            "no cross-origin isolation: coarse timers"
        )
        page.evaluate(
            "(t) => window.runStream(t.slice(0, 500))", tokens
        )  # warm-up (JIT)
        per_run: list[list[float]] = []
        details: dict[str, Any] = {}
        for _ in range(runs):
            out = page.evaluate(
                "(t) => window.runStream(t, {mode: 'incremental'})", tokens
            )
            per_run.append(out["times"])
            details = {
                k: out[k] for k in ("frozenBlocks", "elements", "tables", "codeBlocks")
            }
        # A token's cost is the same work every run; the least of the runs leaves out the
        # time the renderer was not running at all (other processes on a shared machine, GC).
        least = [min(ts) for ts in zip(*per_run)]
        full = page.evaluate(
            "(t) => window.runStream(t.slice(0, 1000), {mode: 'full'})", tokens
        )
        page.close()
        return {
            "chars": len("".join(tokens)),
            "runs": [_summary(ts) for ts in per_run],
            "least_of_runs": _summary(least),
            "full_first_1000": _summary(full["times"]),
            **details,
        }
    finally:
        server.shutdown()


# --- the trace ------------------------------------------------------------------------------------


def bench_trace(browser: Any, loads: int = 3) -> dict[str, Any]:
    import tempfile

    from browser_helpers import USERNAME, VIEWPORT, LiveApp

    from runs.engine.testing import Script, ScriptedServer

    model = ScriptedServer(Script()).start()
    with tempfile.TemporaryDirectory(prefix="agentui-bench-render-") as tmp:
        env = {
            k: v
            for k, v in __import__("os").environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL")
        }
        env["DJANGO_SETTINGS_MODULE"] = "agentui.settings"
        app = LiveApp(Path(tmp), model, env).start()
        try:
            # The browser tests' long-trace seeder, with tables, charts and Markdown texts.
            task_id = int(
                app.seed(
                    "seed_long_trace",
                    USERNAME,
                    TRACE_STEPS,
                    1,
                    tables=TRACE_TABLES,
                    charts=TRACE_CHARTS,
                    markdown=True,
                )
            )
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.goto(app.login_link())
            rows = []
            for _ in range(loads):
                page.goto(f"{app.url}/traces/{task_id}/")
                page.wait_for_selector("#trace[data-ready='true']", timeout=60_000)
                page.wait_for_selector(
                    "#trace[data-dag-ready='true']", timeout=60_000
                )  # drawn after ready
                figures = page.evaluate("() => ({...window.agentui.metrics})")
                # Then each chart as a person scrolls to it: from the scroll to its marks.
                drawn = []
                charts = page.locator(
                    ".tool-card", has=page.locator("code.tool-name", has_text="chart")
                )
                for n in range(TRACE_CHARTS):
                    card = charts.nth(n)
                    started = page.evaluate("performance.now()")
                    card.scroll_into_view_if_needed()
                    card.locator(".result-chart[data-state='drawn']").wait_for(
                        timeout=60_000
                    )
                    drawn.append(page.evaluate("performance.now()") - started)
                    assert (
                        card.locator(".result-chart svg .mark-rect path").count() == 12
                    )
                rows.append({**figures, "chartMs": drawn})
            page.screenshot(
                path=str(ROOT / "test-artifacts" / "bench-render-trace.png")
            )
            context.close()
            return {"task_id": task_id, "loads": rows}
        finally:
            app.stop()
            model.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "which", nargs="?", choices=["stream", "trace", "both"], default="both"
    )
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    args = parser.parse_args()
    from conftest import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    results: dict[str, Any] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=list(CHROMIUM_ARGS)
        )
        print(f"Chromium {browser.version}")
        if args.which in ("stream", "both"):
            stream = results["stream"] = bench_stream(browser)
            print(
                f"\nMarkdown stream: {STREAM_TOKENS:,} tokens, {stream['chars']:,} characters, "
                f"{stream['frozenBlocks']} blocks, {stream['tables']} tables, "
                f"{stream['codeBlocks']} code blocks"
            )
            print("  ms per token | mean | p50 | p99 | max | total")
            named = [(f"run {n}", r) for n, r in enumerate(stream["runs"], 1)]
            named.append(("least of the runs", stream["least_of_runs"]))
            named.append(
                ("whole text per token (first 1,000)", stream["full_first_1000"])
            )
            for name, r in named:
                print(
                    f"  {name} | {r['mean_ms']:.3f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f}"
                    f" | {r['max_ms']:.2f} | {r['total_ms']:.0f}"
                )
        if args.which in ("trace", "both"):
            trace = results["trace"] = bench_trace(browser)
            print(
                f"\nTrace: {TRACE_STEPS} steps, {TRACE_TABLES} tables, {TRACE_CHARTS} charts"
            )
            print(
                "  load | opened ms | fetch / reduce / render ms | DAG (drawn after opening) / timeline / cells ms"
                " | events | chart drawn after scroll ms (first, median of the rest)"
            )
            for n, r in enumerate(trace["loads"], 1):
                rest = statistics.median(r["chartMs"][1:])
                print(
                    f"  {n} | {r['readyAt']:.0f} | {r['fetchMs']:.0f} / {r['reduceMs']:.0f}"
                    f" / {r['renderMs']:.0f} | {r['dagMs']:.0f} / {r['timelineMs']:.0f}"
                    f" / {r['cellsMs']:.0f} | {r['events']} | {r['chartMs'][0]:.0f}, {rest:.0f}"
                )
        browser.close()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
