#!/usr/bin/env python3
"""LLMCompilerAgentWorker against its critical path, LlamaIndex's port and one-call-per-turn function calling.

    .venv/bin/python -m bench.bench_llm_compiler            # k = 1,2,4,8, both tool kinds, 3 runs (~5 min)
    .venv/bin/python -m bench.bench_llm_compiler --quick    # k = 1,4, 1 run (~1 min)

One server and one scenario for every side: the peer's stdlib fake server
(../shared/peer/fake_openai.py) loaded with the peer's workload A built by its make_scenarios.py
with LINE_DELAY=0.2 (planner and joiner: time to first token 0.3 s, one line per 0.2 s; slow_tool
sleeps 0.5 s), plus one uneven-latency case of ours (a diamond around a chain; lookup 0.2 s,
crunch 1.0 s). LlamaIndex runs in the peer venv (/tmp/li-venv, created from the peer's lock file
when missing) through bench/llamaindex_llmc_driver.py; without it that column is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from bench._peer import LI_VENV, PEER_DIR
from runs.engine import (
    AgentRunner,
    BaseTool,
    FunctionCallingAgentWorker,
    FunctionTool,
    LLMCompilerAgentWorker,
    OpenAI,
)

ROOT = Path(__file__).resolve().parent.parent
PEER = PEER_DIR  # ../shared/peer beside the repo; AGENTUI_PEER_DIR overrides (bench/_peer.py)
TTFT, LINE, T_TOOL = 0.3, 0.2, 0.5
JOINER_LINES = 2  # "Thought: ..." and "Action: Finish(...)"
UNEVEN_TAG = "[case=uneven]"
UNEVEN_LATENCY = {"lookup": 0.2, "crunch": 1.0}
# (index, tool, argument, dependencies): a diamond 1 -> {2, 3..5} -> 6 whose one side is a chain
UNEVEN_CALLS = [
    (1, "lookup", "root", []),
    (2, "crunch", "$1", [1]),
    (3, "lookup", "$1/a", [1]),
    (4, "lookup", "$3/b", [3]),
    (5, "lookup", "$4/c", [4]),
    (6, "lookup", "$2 + $5", [2, 5]),
]
UNEVEN_PLAN = [
    "Thought: Fetch the root record, then follow a slow branch and a chain of quick ones side by side.",
    *[f'{index}. {tool}("{arg}")' for index, tool, arg, _ in UNEVEN_CALLS],
    "Thought: I can answer now.",
    f"{len(UNEVEN_CALLS) + 1}. join()<END_OF_PLAN>",
]
UNEVEN_QUESTION = f"{UNEVEN_TAG} Fetch the root record, crunch it, follow its a/b/c chain, and combine both."


# --- the ideal schedules -------------------------------------------------------------------------------


@dataclass
class PlanShape:
    """A plan as the server streams it: call index -> (line number, seconds, dependencies)."""

    calls: dict[int, tuple[int, float, list[int]]]
    lines: int

    def line_at(self, line: int) -> float:
        return TTFT + line * LINE

    def joiner(self) -> float:
        return TTFT + (JOINER_LINES - 1) * LINE

    def plan_end(self) -> float:
        return self.line_at(self.lines - 1)

    def dependency_driven(self) -> float:
        """Critical path: each call starts when its line has arrived and its dependencies are done."""
        end: dict[int, float] = {}
        for index in sorted(self.calls):
            line, seconds, deps = self.calls[index]
            end[index] = max([self.line_at(line)] + [end[d] for d in deps]) + seconds
        return max(max(end.values()), self.plan_end()) + self.joiner()

    def _waves(self) -> list[list[int]]:
        depth: dict[int, int] = {}
        for index in sorted(self.calls):
            depth[index] = 1 + max((depth[d] for d in self.calls[index][2]), default=0)
        return [
            [i for i in self.calls if depth[i] == level]
            for level in range(1, max(depth.values()) + 1)
        ]

    def waves_while_streaming(self) -> float:
        """Wave by wave, but a wave may start before the plan is complete."""
        done = 0.0
        for wave in self._waves():
            done = max(
                max(done, self.line_at(self.calls[i][0])) + self.calls[i][1]
                for i in wave
            )
        return max(done, self.plan_end()) + self.joiner()

    def waves_after_plan(self) -> float:
        """Wave by wave after the whole plan arrived (LlamaIndex's scheduling)."""
        return (
            self.plan_end()
            + sum(max(self.calls[i][1] for i in wave) for wave in self._waves())
            + self.joiner()
        )


def parallel_shape(k: int) -> PlanShape:
    # lines: Thought, k calls, Thought, join()
    return PlanShape({i: (i, T_TOOL, []) for i in range(1, k + 1)}, lines=k + 3)


def uneven_shape() -> PlanShape:
    # call i is on line i (line 0 is the opening Thought)
    calls = {
        index: (index, UNEVEN_LATENCY[tool], deps)
        for index, tool, _, deps in UNEVEN_CALLS
    }
    return PlanShape(calls, lines=len(UNEVEN_PLAN))


def fc_sequential_path(k: int) -> float:
    return k * (TTFT + T_TOOL) + TTFT


# --- server and scenario ----------------------------------------------------------------------------------


def load_peer_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"peer_{name}", PEER / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_scenario(folder: Path) -> tuple[Path, ModuleType]:
    """The peer's workload A at 0.2 s per line, plus the uneven case's two rules."""
    os.environ["LINE_DELAY"] = str(LINE)  # make_scenarios reads it when imported
    scenarios = load_peer_module("make_scenarios")
    assert scenarios.LINE_DELAY == LINE
    scenario = scenarios.parallel_scenario()
    timing = {"ttft_s": TTFT, "token_delay_s": LINE, "chunking": "line"}
    scenario["rules"] += [
        {
            "name": "uneven-plan",
            "match": {
                "system_contains": "utmost parallelizability",
                "last_user_contains": UNEVEN_TAG,
            },
            "response": {"text": "\n".join(UNEVEN_PLAN)},
            **timing,
        },
        {
            "name": "uneven-join",
            "match": {
                "last_user_contains": [
                    "Solve a question answering task with interleaving",
                    UNEVEN_TAG,
                ]
            },
            "response": {
                "text": "Thought: Both branches are in.\nAction: Finish(combined both branches)"
            },
            **timing,
        },
    ]
    path = folder / "scenario.json"
    path.write_text(json.dumps(scenario, indent=1))
    return path, scenarios


class FakeServer:
    """The peer's fake_openai.py in a child process on a free port."""

    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(PEER / "fake_openai.py"),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--script",
                str(script),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        banner = (
            self.proc.stdout.readline()
        )  # "fake_openai listening on http://127.0.0.1:PORT/v1"
        if "listening on" not in banner:
            self.close()
            raise RuntimeError(f"fake server did not start: {banner!r}")
        self.base_url = banner.split("listening on", 1)[1].strip()

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# --- our side ---------------------------------------------------------------------------------------------


class Spans:
    def __init__(self) -> None:
        self.items: list[tuple[float, float]] = []
        self.lock = threading.Lock()

    def add(self, start: float) -> None:
        with self.lock:
            self.items.append((start, time.time()))

    def max_concurrency(self) -> int:
        points = sorted(
            [(s, 1) for s, _ in self.items] + [(e, -1) for _, e in self.items]
        )
        best = current = 0
        for _, change in points:
            current += change
            best = max(best, current)
        return best


def sleeping_tool(name: str, seconds: float, kind: str, spans: Spans) -> BaseTool:
    """A tool that sleeps: ``async def`` with asyncio.sleep, or a plain ``def`` with time.sleep."""

    def run(x: str) -> str:
        start = time.time()
        time.sleep(seconds)
        spans.add(start)
        return f"{name}({x})"

    async def arun(x: str) -> str:
        start = time.time()
        await asyncio.sleep(seconds)
        spans.add(start)
        return f"{name}({x})"

    description = f"Look up one item (takes {seconds} s)."
    fn: Callable[..., Any] = run if kind == "sync" else arun
    return FunctionTool.from_defaults(fn, name=name, description=description)


async def timed(
    agent: AgentRunner, question: str
) -> tuple[float, str | None, str | None]:
    start = time.perf_counter()
    try:
        answer, error = (await agent.achat(question)).response, None
    except Exception as exc:  # noqa: BLE001 - a failed run is a result to report
        answer, error = None, f"{type(exc).__name__}: {exc}"[:300]
    return time.perf_counter() - start, answer, error


async def ours(
    llm: OpenAI, mode: str, tools: list[BaseTool], question: str
) -> tuple[float, str | None, str | None]:
    if mode == "llmc":
        worker: Any = LLMCompilerAgentWorker.from_tools(tools, llm=llm)
    else:
        worker = FunctionCallingAgentWorker.from_tools(
            tools, llm=llm, max_function_calls=100
        )
    return await timed(AgentRunner(worker), question)


async def run_ours(
    base_url: str, ks: list[int], kinds: list[str], runs: int, scenarios: ModuleType
) -> list[dict[str, Any]]:
    llm = OpenAI(
        model="gpt-4o-mini",
        api_base=base_url,
        api_key="sk-fake",
        max_retries=0,
        timeout=60,
    )
    # untimed warm-up: builds the client (one per loop) and the first connection
    await ours(
        llm,
        "llmc",
        [sleeping_tool("slow_tool", T_TOOL, "async", Spans())],
        scenarios.question(1, "llmc"),
    )
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        for k in ks:
            for mode in ("llmc", "seq"):
                for run in range(runs):
                    spans = Spans()
                    tool = sleeping_tool("slow_tool", T_TOOL, kind, spans)
                    wall, answer, error = await ours(
                        llm, mode, [tool], scenarios.question(k, mode)
                    )
                    rows.append(
                        {
                            "side": "ours",
                            "mode": mode,
                            "case": "parallel",
                            "tool": kind,
                            "k": k,
                            "run": run,
                            "wall_s": wall,
                            "answer": answer,
                            "error": error,
                            "concurrency": spans.max_concurrency(),
                        }
                    )
                    print(
                        f"ours  {kind:5s} k={k} {mode:4s} run{run} wall={wall:.3f}s conc={spans.max_concurrency()} "
                        f"err={error}",
                        flush=True,
                    )
        for run in range(runs):
            spans = Spans()
            tools = [
                sleeping_tool(name, seconds, kind, spans)
                for name, seconds in UNEVEN_LATENCY.items()
            ]
            wall, answer, error = await ours(llm, "llmc", tools, UNEVEN_QUESTION)
            rows.append(
                {
                    "side": "ours",
                    "mode": "llmc",
                    "case": "uneven",
                    "tool": kind,
                    "run": run,
                    "wall_s": wall,
                    "answer": answer,
                    "error": error,
                    "concurrency": spans.max_concurrency(),
                }
            )
            print(
                f"ours  {kind:5s} uneven run{run} wall={wall:.3f}s err={error}",
                flush=True,
            )
    return rows


# --- LlamaIndex's side -------------------------------------------------------------------------------------


def llamaindex_python() -> tuple[Path | None, str]:
    """The peer venv's python, created from the peer's lock file when missing; or None and why."""
    python = LI_VENV / "bin" / "python"
    try:
        if not python.exists():
            print(
                f"creating {LI_VENV} from {PEER / 'requirements-lock.txt'} (a few minutes, once)",
                flush=True,
            )
            subprocess.run(
                ["python3", "-m", "venv", str(LI_VENV)], check=True, timeout=300
            )
            subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "-r",
                    str(PEER / "requirements-lock.txt"),
                ],
                check=True,
                timeout=900,
            )
        subprocess.run(
            [
                str(python),
                "-W",
                "ignore",
                "-c",
                "import llama_index.agent.llm_compiler",
            ],
            check=True,
            timeout=300,
            capture_output=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return (
            None,
            f"LlamaIndex column skipped: the peer venv {LI_VENV} is not usable ({type(exc).__name__}: {exc})",
        )
    return python, ""


def driver_rows(command: list[str]) -> Iterator[dict[str, Any]]:
    """Run a LlamaIndex driver (in the peer venv, from the repo root) and yield each JSON line it prints."""
    # LlamaIndex's asyncio.run() per step leaves "Event loop is closed" tracebacks on stderr (peer
    # README, section 5.6): keep them out of the report, and show the end only if the driver fails
    with (
        tempfile.TemporaryFile("w+") as stderr,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT
        ) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                yield json.loads(line)
        if proc.wait() != 0:
            stderr.seek(0)
            print(f"the LlamaIndex driver failed:\n{stderr.read()[-3000:]}", flush=True)


def run_llamaindex(
    python: Path, base_url: str, ks: list[int], kinds: list[str], runs: int
) -> list[dict[str, Any]]:
    command = [
        str(python),
        "-W",
        "ignore",
        "-m",
        "bench.llamaindex_llmc_driver",
        "--peer-dir",
        str(PEER),
        "--base-url",
        base_url,
        "--ks",
        ",".join(map(str, ks)),
        "--tools",
        ",".join(kinds),
        "--runs",
        str(runs),
        "--uneven-question",
        UNEVEN_QUESTION,
        "--uneven-latencies",
        json.dumps(UNEVEN_LATENCY),
    ]
    rows: list[dict[str, Any]] = []
    for line in driver_rows(command):
        row = {"side": "llamaindex", "mode": "llmc", **line}
        rows.append(row)
        label = f"k={row['k']}" if row["case"] == "parallel" else "uneven"
        print(
            f"llama {row['tool']:5s} {label} llmc run{row['run']} wall={row['wall_s']:.3f}s "
            f"err={row['error']}",
            flush=True,
        )
    return rows


# --- report ---------------------------------------------------------------------------------------------------


def median(rows: list[dict[str, Any]], **where: Any) -> float | None:
    walls = [
        r["wall_s"]
        for r in rows
        if all(r.get(key) == value for key, value in where.items()) and not r["error"]
    ]
    return statistics.median(walls) if walls else None


def within_target(wall: float, path: float) -> bool:
    return wall <= path + max(0.05 * path, 0.05)


def _cell(value: float | None, fmt: str = "{:.2f}") -> str:
    return fmt.format(value) if value is not None else "–"


def report_footer(rows: list[dict[str, Any]], li_note: str) -> list[str]:
    """The lines that close a report: failed runs, and why a column is missing."""
    out: list[str] = []
    errors = [r for r in rows if r["error"]]
    if errors:
        out += [
            "",
            f"{len(errors)} run(s) failed, e.g. {errors[0]['side']} {errors[0]['error']}",
        ]
    if li_note:
        out += ["", li_note]
    return out


def report(
    rows: list[dict[str, Any]], ks: list[int], kinds: list[str], runs: int, li_note: str
) -> str:
    out = [
        f"planner and joiner: first token after {TTFT} s, then one line per {LINE} s; slow_tool sleeps {T_TOOL} s",
        f"median wall seconds of {runs} run(s); critical path = planner until the last call's line + 0.5 s "
        "(or the end of the plan if later) + joiner",
    ]
    for kind in kinds:
        out += [
            "",
            f"tool = {kind} ({'async def + asyncio.sleep' if kind == 'async' else 'plain def + time.sleep'})",
            "",
            "| k | ours | critical path | ours − path | target met | LlamaIndex LLMCompiler | LlamaIndex ÷ ours "
            "| FC sequential (ours) | FC-seq path | FC-seq ÷ ours | max concurrent tools |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for k in ks:
            wall = median(
                rows, side="ours", mode="llmc", case="parallel", tool=kind, k=k
            )
            li = median(rows, side="llamaindex", case="parallel", tool=kind, k=k)
            seq = median(rows, side="ours", mode="seq", case="parallel", tool=kind, k=k)
            path = parallel_shape(k).dependency_driven()
            conc = max(
                (
                    r["concurrency"]
                    for r in rows
                    if r["side"] == "ours"
                    and r["mode"] == "llmc"
                    and r["case"] == "parallel"
                    and r["tool"] == kind
                    and r["k"] == k
                ),
                default=0,
            )
            out.append(
                f"| {k} | {_cell(wall)} | {path:.2f} | {_cell(wall - path if wall else None, '{:+.3f}')} | "
                f"{'yes' if wall and within_target(wall, path) else 'NO'} | {_cell(li)} | "
                f"{_cell(li / wall if li and wall else None, '{:.2f}×')} | {_cell(seq)} | {fc_sequential_path(k):.2f} | "
                f"{_cell(seq / wall if seq and wall else None, '{:.2f}×')} | {conc} |"
            )
    shape = uneven_shape()
    out += [
        "",
        "uneven latencies (lookup 0.2 s, crunch 1.0 s): 1 → {2 crunch, 3 → 4 → 5} → 6",
        "",
        "| tool | ours | dependency-driven path | target met | waves while streaming | waves after the whole plan "
        "| LlamaIndex LLMCompiler | LlamaIndex ÷ ours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in kinds:
        wall = median(rows, side="ours", case="uneven", tool=kind)
        li = median(rows, side="llamaindex", case="uneven", tool=kind)
        path = shape.dependency_driven()
        out.append(
            f"| {kind} | {_cell(wall)} | {path:.2f} | {'yes' if wall and within_target(wall, path) else 'NO'} | "
            f"{shape.waves_while_streaming():.2f} | {shape.waves_after_plan():.2f} | {_cell(li)} | "
            f"{_cell(li / wall if li and wall else None, '{:.2f}×')} |"
        )
    return "\n".join(out + report_footer(rows, li_note))


def main() -> None:
    global LINE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="k = 1,4 and one run each (about a minute)"
    )
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--ks", default=None, help="comma-separated, default 1,2,4,8")
    parser.add_argument(
        "--tools", default="async,sync", help="async,sync or one of them"
    )
    parser.add_argument(
        "--line-delay",
        type=float,
        default=LINE,
        help="seconds per streamed line (peer default 0.02)",
    )
    parser.add_argument("--no-llamaindex", action="store_true")
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every run here"
    )
    args = parser.parse_args()
    LINE = args.line_delay  # the scenario, the ideal paths and the report all follow it
    ks = [int(k) for k in (args.ks or ("1,4" if args.quick else "1,2,4,8")).split(",")]
    runs = args.runs or (1 if args.quick else 3)
    kinds = args.tools.split(",")
    started = time.time()
    python, li_note = (
        (None, "LlamaIndex column skipped (--no-llamaindex)")
        if args.no_llamaindex
        else llamaindex_python()
    )
    with tempfile.TemporaryDirectory(prefix="bench-llmc-") as folder:
        script, scenarios = build_scenario(Path(folder))
        server = FakeServer(script)
        try:
            print(f"fake server {server.base_url}, scenario {script}", flush=True)
            rows = asyncio.run(run_ours(server.base_url, ks, kinds, runs, scenarios))
            if python is not None:
                rows += run_llamaindex(python, server.base_url, ks, kinds, runs)
        finally:
            server.close()
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": rows, "ks": ks, "runs": runs, "cpus": os.cpu_count()}, indent=1
            )
        )
    print()
    print(report(rows, ks, kinds, runs, li_note))
    print(
        f"\n(bench took {time.time() - started:.0f} s on {os.cpu_count()} CPUs, Python {sys.version.split()[0]})"
    )


if __name__ == "__main__":
    main()
