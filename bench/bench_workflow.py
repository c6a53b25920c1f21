"""AgentWorkflow per-turn overhead, ours against LlamaIndex's, on one scripted server.

    .venv/bin/python -m bench.bench_workflow [--turns 50] [--runs 3]   # from the repo root

Both run the same three-agent scenario (bench/workflow_scenario.py: every turn one model call
that hands off to the next agent, the last one answers) against one fake_openai.py server (the
peer harness's, zero latency, streamed replies), each side in its own process: ours here
(``ours`` subcommand), LlamaIndex's AgentWorkflow in its venv (``-m bench.li_workflow_driver``).

A turn is from one AgentInput event to the next (the last: to the answer). Per turn we report
"turn" = its wall time minus the server's time on its request (t_done - t_recv in the server
log), and "own" = its wall time minus the time spent inside the openai SDK (``create`` and each
stream ``__anext__``, timed by patching the SDK classes as bench/bench_overhead.py does): the
framework's own work. The SDK's request transform grows with the history on both sides; "own"
leaves it out. Flat = the last 10 turns cost about what the first 10 cost, although the
conversation grows by two messages a turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._peer import (
    PeerServer,
    ensure_li_venv,
    host_info,
    li_versions,
    run_li_json,
)
from bench.bench_overhead import SDK, patch_openai_sdk_timer
from bench.workflow_scenario import (
    AGENTS,
    ANSWER,
    DESCRIPTION,
    QUESTION,
    SYSTEM,
    record_call_starts,
    script,
)

SIDES = ("agentui", "llamaindex")
Measured = dict[str, list[float]]  # "turn" / "own" -> ms per turn


async def ours(base_url: str, turns: int) -> dict[str, Any]:
    from runs.engine import AgentInput, AgentWorkflow, FunctionAgent, OpenAI

    llm = OpenAI(
        model="gpt-4o-mini",
        api_base=base_url,
        api_key="sk-fake",
        max_retries=0,
        timeout=60,
    )
    agents = [
        FunctionAgent(
            name=n, description=DESCRIPTION[n], system_prompt=SYSTEM[n], llm=llm
        )
        for n in AGENTS
    ]
    workflow = AgentWorkflow(agents, root_agent=AGENTS[0])
    patch_openai_sdk_timer()
    starts = record_call_starts(SDK)
    marks: list[float] = []
    start = time.perf_counter()
    handler = workflow.run(user_msg=QUESTION)
    async for event in handler.stream_events():
        if isinstance(event, AgentInput):
            marks.append(time.perf_counter())
    result = await handler
    end = time.perf_counter()
    return {
        "marks": [m - start for m in marks],
        "calls": [(t - start, sdk) for t, sdk in starts],
        "sdk_total": SDK.t,
        "total_s": end - start,
        "answer": result.response.content,
    }


def _server_times(log_path: Path) -> list[float]:
    records = [
        json.loads(line) for line in log_path.read_text().splitlines() if line.strip()
    ]
    records.sort(key=lambda r: r["idx"])
    return [r["t_done"] - r["t_recv"] for r in records]


def _per_turn(result: dict[str, Any], server_s: list[float]) -> Measured:
    """A turn runs from one model call's start to the next's (the last: to the answer)."""
    calls = result["calls"] + [(result["total_s"], result["sdk_total"])]
    turn, own = [], []
    for i in range(len(calls) - 1):
        wall = calls[i + 1][0] - calls[i][0]
        turn.append((wall - server_s[i]) * 1000)
        own.append((wall - (calls[i + 1][1] - calls[i][1])) * 1000)
    return {"turn": turn, "own": own}


def _slope(values: list[float]) -> float:
    """Least-squares ms per turn."""
    n = len(values)
    mean_x = (n - 1) / 2
    mean_y = statistics.fmean(values)
    num = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den if den else 0.0


def _summary(per_run: list[list[float]]) -> dict[str, float]:
    # per turn: the median over runs, so one run slowed by a busy machine does not decide a turn
    turns = [
        statistics.median(run[i] for run in per_run)
        for i in range(min(map(len, per_run)))
    ]
    return {
        "median_ms": statistics.median(turns),
        "first10_ms": statistics.fmean(turns[:10]),
        "last10_ms": statistics.fmean(turns[-10:]),
        "slope_ms_per_turn": _slope(turns),
    }


def _run_side(name: str, server: PeerServer, turns: int) -> dict[str, Any]:
    if name == "agentui":
        argv = [
            sys.executable,
            "-m",
            "bench.bench_workflow",
            "ours",
            "--base-url",
            server.base_url,
        ]
        out = subprocess.run(
            [*argv, "--turns", str(turns)],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    else:
        result = run_li_json(
            [
                "-m",
                "bench.li_workflow_driver",
                "--base-url",
                server.base_url,
                "--turns",
                str(turns),
            ]
        )
        if "error" in result:
            raise SystemExit(f"LlamaIndex side failed: {result['error']}")
    if ANSWER not in str(result["answer"]) or len(result["calls"]) != turns:
        raise SystemExit(
            f"{name} did not run the scenario: {len(result['marks'])} turns, {result['answer']!r}"
        )
    return result


def measure(turns: int, runs: int, sides: tuple[str, ...]) -> dict[str, Any]:
    """Runs interleaved (ours, theirs, ours, ...) so load drift hits both alike."""
    measured: dict[str, list[Measured]] = {name: [] for name in sides}
    totals: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="bench-workflow-") as tmp:
        scenario = Path(tmp) / "scenario_workflow.json"
        scenario.write_text(
            json.dumps(script(turns))
        )  # fake_openai.py starts with a script
        with PeerServer(scenario) as server:
            for run in range(runs):
                for name in sides:
                    log = Path(tmp) / f"{name}-{run}.jsonl"
                    server.load(script=script(turns), log_path=log)
                    result = _run_side(name, server, turns)
                    measured[name].append(_per_turn(result, _server_times(log)))
                    totals[name].append(result["total_s"])
    return {
        name: {
            "turn": _summary([m["turn"] for m in measured[name]]),
            "own": _summary([m["own"] for m in measured[name]]),
            "total_s_median": statistics.median(totals[name]),
        }
        for name in sides
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--base-url", help="(with the `ours` command) the server to use"
    )
    parser.add_argument(
        "command",
        nargs="?",
        choices=["ours"],
        help="(internal) run our side once, print JSON",
    )
    args = parser.parse_args()
    if args.command == "ours":
        print(json.dumps(asyncio.run(ours(args.base_url, args.turns))))
        return
    ok, note = ensure_li_venv()
    print(f"[peer] {note}", file=sys.stderr)
    sides = SIDES if ok else SIDES[:1]
    report = {
        "turns": args.turns,
        "runs": args.runs,
        "host": host_info(),
        "llamaindex": li_versions() if ok else None,
        "sides": measure(args.turns, args.runs, sides),
    }
    print(json.dumps(report, indent=2))
    print()
    print(
        f"per-turn ms over {args.turns} turns (per turn the median of {args.runs} runs)"
    )
    print(
        "turn = wall time minus the server's time; own = wall time minus the time inside the openai SDK"
    )
    print(
        f"{'':12} {'':5} {'median':>8} {'turns 1-10':>11} {'last 10':>9} {'slope/turn':>11}"
    )
    for name, row in report["sides"].items():
        for kind in ("turn", "own"):
            r = row[kind]
            print(
                f"{name:12} {kind:5} {r['median_ms']:8.2f} {r['first10_ms']:11.2f} "
                f"{r['last10_ms']:9.2f} {r['slope_ms_per_turn']:11.3f}"
            )
        print(f"{name:12} whole run {row['total_s_median']:.2f} s")


if __name__ == "__main__":
    main()
