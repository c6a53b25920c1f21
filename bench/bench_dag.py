"""The step DAG's layout and draw time in Chromium (Playwright), for plans of 10, 100 and 500 nodes.

    PYTHONPATH=.:tests .venv/bin/python bench/bench_dag.py                 # 10/100/500, 5 runs each
    PYTHONPATH=.:tests .venv/bin/python bench/bench_dag.py --sizes 10,100,500,1500 --runs 3

The harness (bench/dag_bench.html, served from this checkout) builds an LLMCompiler-shaped plan
of n nodes (a message, steps of up to 8 planned calls, each call depending on one or two earlier
calls of its step, with `$N` on those edges) and hands it to the page's DAG view
(static/js/dag.js) in a fresh page: `update` is the diff into Cytoscape plus the dagre layout
and the framing; `draw` is from there until Cytoscape has painted it (its next animation frame,
so up to one frame of waiting is included). Each size runs in a new
page `--runs` times; the table gives the median and the least.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_render import ROOT, _IsolatedHandler  # noqa: E402


def bench(
    browser: Any, sizes: list[int], runs: int
) -> dict[int, list[dict[str, float]]]:
    handler = functools.partial(_IsolatedHandler, directory=str(ROOT))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/bench/dag_bench.html"
    results: dict[int, list[dict[str, float]]] = {}
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)
        page.wait_for_function("window.harnessReady === true")
        page.evaluate("() => window.runDag(50)")  # warm-up (JIT)
        for n in sizes:
            results[n] = []
            for _ in range(runs):
                page.goto(url)
                page.wait_for_function("window.harnessReady === true")
                results[n].append(page.evaluate("(n) => window.runDag(n)", n))
        page.close()
        assert not errors, errors
        return results
    finally:
        server.shutdown()


def _median_least(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ({min(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,500")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    args = parser.parse_args()
    from conftest import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    sizes = [int(s) for s in args.sizes.split(",")]
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=list(CHROMIUM_ARGS)
        )
        print(f"Chromium {browser.version}; load average {os.getloadavg()[0]:.1f}")
        results = bench(browser, sizes, args.runs)
        browser.close()
    print(
        "nodes | edges ($N labels) | layout ms | update ms (diff + layout + framing) | draw ms | total ms: median (least)"
    )
    for rows in results.values():
        r0 = rows[0]
        figures = " | ".join(
            _median_least([r[key] for r in rows])
            for key in ("layoutMs", "updateMs", "drawMs", "totalMs")
        )
        print(f"{r0['nodes']} | {r0['edges']} ({r0['labelled']}) | {figures}")
    if args.json:
        args.json.write_text(
            json.dumps({str(k): v for k, v in results.items()}, indent=1)
        )


if __name__ == "__main__":
    main()
