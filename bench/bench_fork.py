"""Fork here and Compare on 500-step notebooks (issue 14).

    PYTHONPATH=.:tests .venv/bin/python -m bench.bench_fork

fork: a finished 500-step notebook (two tool calls a step; its rows, checkpoints, conversation
and 3,500 events stored as a run leaves them, by tests/browser_helpers.py `seed_long_trace`) is
forked at step 250 and at step 499, five times each: the server time of `fork_notebook` (one
transaction: rewind, rows, events), measured inside the app's process (wall clock, and the
process's CPU time, which other processes on a busy machine do not inflate), then the whole
`POST /api/tasks/<id>/fork/` as the page sends it.

compare: two 500-step traces (two and three tool calls a step, so every step differs) opened
side by side three times: from navigation until the compare view is drawn (both exports
fetched, reduced, aligned, drawn), and the draw alone (align + DOM).

The app runs as in the browser tests: daphne on a fresh SQLite file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STEPS = 500
REPEATS = 5
LOADS = 3

_TIME_FORK = """
import json, time
from runs.models import Step
from runs.store.fork import fork_notebook
ids = list(Step.objects.filter(task_id={pk}).order_by("created_at", "pk").values_list("step_id", flat=True))
times, cpu = [], []
for _ in range({repeats}):
    started, started_cpu = time.perf_counter(), time.process_time()
    fork = fork_notebook({pk}, ids[{step} - 1])
    times.append((time.perf_counter() - started) * 1000)
    cpu.append((time.process_time() - started_cpu) * 1000)
print(json.dumps({{"ms": times, "cpu_ms": cpu, "events": fork.last_seq, "steps": Step.objects.filter(task=fork).count()}}))
"""


def _last_json(out: str) -> Any:
    return json.loads(out.strip().splitlines()[-1])


def bench(browser: Any) -> dict[str, Any]:
    from browser_helpers import USERNAME, VIEWPORT, LiveApp

    from runs.engine.testing import Script, ScriptedServer

    model = ScriptedServer(Script()).start()
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")
    }
    results: dict[str, Any] = {"steps": STEPS}
    with tempfile.TemporaryDirectory(prefix="agentui-bench-fork-") as tmp:
        app = LiveApp(Path(tmp), model, env).start()
        try:
            seed = "from browser_helpers import seed_long_trace; print(seed_long_trace({!r}, {}, {}, rows=True))"
            source = int(_last_json(app.shell(seed.format(USERNAME, STEPS, 2))))
            other = int(_last_json(app.shell(seed.format(USERNAME, STEPS, 3))))
            for step in (250, STEPS - 1):
                code = _TIME_FORK.format(pk=source, step=step, repeats=REPEATS)
                results[f"fork_at_{step}"] = _last_json(app.shell(code, timeout=600))
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.goto(app.login_link())
            page.goto(f"{app.url}/traces/{source}/")
            page.wait_for_selector("#trace[data-ready='true']", timeout=60_000)
            step_id = page.evaluate("() => [...window.agentui.model.steps.keys()][249]")
            csrf = page.locator("input[name=csrfmiddlewaretoken]").first.input_value()
            http = []
            for _ in range(REPEATS):
                took = page.evaluate(
                    """async ([url, stepId, csrf]) => {
                      const t0 = performance.now();
                      const r = await fetch(url, {method: "POST", credentials: "same-origin",
                        headers: {"Content-Type": "application/json", "X-CSRFToken": csrf},
                        body: JSON.stringify({step_id: stepId})});
                      if (r.status !== 201) throw new Error(await r.text());
                      return performance.now() - t0;
                    }""",
                    [f"{app.url}/api/tasks/{source}/fork/", step_id, csrf],
                )
                http.append(took)
            results["fork_http_at_250_ms"] = http
            loads = []
            for _ in range(LOADS):
                page.goto(f"{app.url}/traces/compare/?a={source}&b={other}")
                page.wait_for_selector("#compare[data-ready='true']", timeout=60_000)
                loads.append(page.evaluate("() => ({...window.agentui.metrics})"))
            results["compare"] = loads
            results["compare_summary"] = page.locator("#compare-summary").inner_text()
            page.screenshot(
                path=str(ROOT / "test-artifacts" / "bench-fork-compare.png")
            )
            context.close()
        finally:
            app.stop()
            model.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    args = parser.parse_args()
    from conftest import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=list(CHROMIUM_ARGS)
        )
        results = bench(browser)
        browser.close()
    print(
        f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}"
    )
    for key in (k for k in results if k.startswith("fork_at_")):
        r = results[key]
        print(
            f"{key} of {STEPS} (server time, ms): median {statistics.median(r['ms']):.0f}, "
            f"max {max(r['ms']):.0f}; runs {', '.join(f'{t:.0f}' for t in r['ms'])}; "
            f"CPU median {statistics.median(r['cpu_ms']):.0f}; "
            f"the fork holds {r['steps']} steps, {r['events']} events"
        )
    http = results["fork_http_at_250_ms"]
    print(
        f"POST fork at 250 from the page (ms): median {statistics.median(http):.0f}, max {max(http):.0f}"
    )
    print(f"compare, {results['compare_summary']}")
    print("  load | drawn after navigation ms | fetch / reduce / draw ms | rows")
    for n, r in enumerate(results["compare"], 1):
        print(
            f"  {n} | {r['readyAt']:.0f} | {r['fetchMs']:.0f} / {r['reduceMs']:.0f}"
            f" / {r['renderMs']:.0f} | {r['rows']}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
