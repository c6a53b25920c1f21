"""What exporting spans costs a step: a 200-step notebook run with telemetry off, on with the
collector down (nothing listens on its port), and on with a real Arize Phoenix taking the spans.

    .venv/bin/python -m bench.bench_telemetry [--steps 200] [--rounds 3]   # from the repo root

Each run is a fresh process: the live app on a new SQLite database (migrated), the in-memory
channel layer, the scripted model server, and a function-calling preset whose model calls the
`add` tool `--steps - 1` times and then answers, in auto mode: every step goes through the same
publisher (storing its events, and handing them to the telemetry hook) as in the app. The cases
run interleaved, `--rounds` times, so a load change on the machine hits each of them alike.

Per step: the stored events' `step_started` -> `step_completed` times (the step as a person waits
for it), and the run's wall time / steps (including the driver between steps). Phoenix comes
from .venv-phoenix (`make phoenix`); without it the "up" case is left out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOOP_TAG = "[bench=telemetry]"
CASES = ("off", "down", "up")


# --- one run, in its own process ----------------------------------------------------------------


def long_worker(tools: Any, llm: Any) -> Any:
    """The function-calling worker with room for a long tool loop (the preset's stops at 20)."""
    from runs.engine import FunctionCallingAgentWorker

    return FunctionCallingAgentWorker.from_tools(
        tools, llm=llm, max_function_calls=10_000
    )


def _script(steps: int) -> Any:
    from runs.engine.testing import Match, Reply, Rule, Script, ToolCallSpec

    return Script(
        rules=[
            Rule(
                name="answer",
                match=Match(
                    last_user_contains=LOOP_TAG, tool_results_since_user=steps - 1
                ),
                reply=Reply(text="Done adding."),
            ),
            Rule(
                name="call",
                match=Match(last_user_contains=LOOP_TAG),
                reply=Reply(
                    text="Adding.",
                    tool_calls=[ToolCallSpec(name="add", arguments={"a": 1, "b": 1})],
                ),
            ),
        ]
    )


def run_case(steps: int) -> dict[str, Any]:
    """One notebook run of `steps` steps in this process (settings from the environment)."""
    import asyncio

    import django

    django.setup()
    from django.core.management import call_command
    from django.test import override_settings

    call_command("migrate", verbosity=0, interactive=False)
    from django.contrib.auth import get_user_model

    from runs import service
    from runs.engine.testing import ScriptedServer
    from runs.models import Event
    from runs.service import runtime
    from runs.telemetry import recorder as telemetry

    # the hook's own time: every event the publisher stores goes through observe()
    hook_s = [0.0]
    observe = telemetry.observe

    def timed_observe(notebook: int, event: Any) -> None:
        start = time.perf_counter()
        observe(notebook, event)
        hook_s[0] += time.perf_counter() - start

    telemetry.observe = timed_observe

    presets = {
        "long": {
            "label": "Long tool loop",
            "worker": "bench.bench_telemetry.long_worker",
            "tools": ["runs.presets.tools.arithmetic.add"],
        }
    }

    async def go() -> dict[str, Any]:
        user, _ = await get_user_model().objects.aget_or_create(username="bench")
        started = time.perf_counter()
        task = await service.create_notebook(user, f"{LOOP_TAG} add", "long", "auto")
        await service.wait_idle(timeout=600)
        wall = time.perf_counter() - started
        stored = [
            e.payload async for e in Event.objects.filter(task=task).order_by("seq")
        ]
        return {"wall": wall, "events": stored}

    with (
        ScriptedServer(_script(steps)) as server,
        override_settings(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="sk-bench",
            AGENTUI_MODEL="scripted",
            AGENTUI_PRESETS=presets,
        ),
    ):
        runtime.forget_all()
        result = asyncio.run(go())
    starts = {
        e["step_id"]: e["at"] for e in result["events"] if e["type"] == "step_started"
    }
    step_ms = [
        (e["at"] - starts[e["step_id"]]) * 1000
        for e in result["events"]
        if e["type"] == "step_completed" and e["step_id"] in starts
    ]
    answered = any(e["type"] == "task_completed" for e in result["events"])
    sink = telemetry.sink()
    exported: dict[str, int] | None = None
    if sink is not None:
        if os.environ.get("BENCH_FLUSH"):  # Phoenix up: wait until it has them all
            sink.flush()
        stats = sink.stats()
        exported = {
            "queued": stats.queued,
            "exported": stats.exported,
            "failed": stats.failed,
            "dropped": stats.dropped,
        }
    return {
        "steps": len(step_ms),
        "answered": answered,
        "step_ms_median": statistics.median(step_ms),
        "step_ms_mean": statistics.fmean(step_ms),
        "wall_ms_per_step": result["wall"] * 1000 / max(1, len(step_ms)),
        "hook_us_per_step": hook_s[0] * 1e6 / max(1, len(step_ms)),
        "spans": exported,
    }


# --- orchestration ------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_phoenix(workdir: Path) -> tuple[subprocess.Popen[bytes], str] | None:
    phoenix = ROOT / ".venv-phoenix" / "bin" / "phoenix"
    if not phoenix.exists():
        return None
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (workdir / "phoenix.log").open("wb")
    process = subprocess.Popen(
        [str(phoenix), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    import urllib.request

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.5)
    process.terminate()
    return None


def child(
    case: str, steps: int, workdir: Path, phoenix_url: str | None
) -> dict[str, Any]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OTEL_")
        and k not in ("DATABASE_URL", "REDIS_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    database = workdir / f"{case}-{time.monotonic_ns()}.sqlite3"
    env.update(
        DJANGO_SETTINGS_MODULE="agentui.settings",
        DATABASE_URL=f"sqlite:///{database}",
        AGENTUI_LOG_LEVEL="ERROR",
    )
    if case == "down":
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{_free_port()}"
    elif case == "up":
        assert phoenix_url is not None
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = phoenix_url
        env["AGENTUI_OTEL_PROJECT"] = "bench"
        env["BENCH_FLUSH"] = "1"
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_telemetry", "_case", str(steps)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    database.unlink(missing_ok=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-telemetry-") as tmp:
        workdir = Path(tmp)
        phoenix = start_phoenix(workdir)
        cases = CASES if phoenix is not None else CASES[:2]
        if phoenix is None:
            print("(no .venv-phoenix: the 'up' case is left out; make phoenix)")
        runs: dict[str, list[dict[str, Any]]] = {case: [] for case in cases}
        try:
            for n in range(args.rounds):
                for case in cases:
                    result = child(
                        case, args.steps, workdir, phoenix[1] if phoenix else None
                    )
                    assert result["answered"] and result["steps"] == args.steps, result
                    runs[case].append(result)
                    print(
                        f"round {n + 1} {case:>4}: step p50 {result['step_ms_median']:.2f} ms, "
                        f"wall/step {result['wall_ms_per_step']:.2f} ms, "
                        f"hook {result['hook_us_per_step']:.0f} µs/step, spans {result['spans']}",
                        flush=True,
                    )
        finally:
            if phoenix is not None:
                phoenix[0].terminate()
                phoenix[0].wait(timeout=30)
    base_step = statistics.median(r["step_ms_median"] for r in runs["off"])
    base_wall = statistics.median(r["wall_ms_per_step"] for r in runs["off"])
    print(f"\n{args.steps} steps, {args.rounds} rounds; medians over the rounds")
    print(
        "| exporter | step p50 (ms) | vs off | wall / step (ms) | vs off | hook (µs/step) |"
    )
    print("|---|---|---|---|---|---|")
    for case in cases:
        step = statistics.median(r["step_ms_median"] for r in runs[case])
        wall = statistics.median(r["wall_ms_per_step"] for r in runs[case])
        hook = statistics.median(r["hook_us_per_step"] for r in runs[case])
        print(
            f"| {case} | {step:.2f} | {(step / base_step - 1) * 100:+.1f} % "
            f"| {wall:.2f} | {(wall / base_wall - 1) * 100:+.1f} % | {hook:.0f} |"
        )
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "_case":
        print(json.dumps(run_case(int(sys.argv[2]))))
    else:
        main()
