#!/usr/bin/env python3
"""CoAAgentWorker against its critical path and LlamaIndex's CoA pack, and a 12-turn conversation.

    .venv/bin/python -m bench.bench_coa               # 3 runs per case, both tool kinds (~2 min)
    .venv/bin/python -m bench.bench_coa --runs 1      # quicker

One server and one script for both sides: the peer's stdlib fake server
(../shared/peer/fake_openai.py). Every scripted reply: first token after 0.3 s, then one line per
20 ms (the peer's workload A); slow_tool sleeps 0.5 s. Cases:

- ``fan``: three independent placeholders and one that uses the first's result
  (``[FUNC slow_tool(y1) = y4]``), one per line, then the refine reply;
- ``k=8``: the peer's own CoA case, eight independent placeholders (LlamaIndex measured 4.85 s);
- a 12-turn conversation on one agent with zero-latency plain answers (no placeholder), per-turn
  time and history length (LlamaIndex's pack doubles its history every turn).

LlamaIndex runs in the peer venv (/tmp/li-venv) through bench/llamaindex_coa_driver.py, with
``achat`` on one loop and one reused client; without the venv that column is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._peer import PEER_DIR
from bench.bench_llm_compiler import (
    FakeServer,
    Spans,
    _cell,
    driver_rows,
    llamaindex_python,
    load_peer_module,
    median,
    report_footer,
    sleeping_tool,
    within_target,
)
from runs.engine import AgentRunner, CoAAgentWorker, FunctionTool, OpenAI

ROOT = Path(__file__).resolve().parent.parent
TTFT, LINE, T_TOOL = 0.3, 0.02, 0.5
TIMING = {"ttft_s": TTFT, "token_delay_s": LINE, "chunking": "line"}
INSTANT = {"ttft_s": 0.0, "token_delay_s": 0.0, "chunking": "none"}
# what each side's reasoning and refine prompts say (ours, LlamaIndex's)
REASONING_MARKERS = (
    "do not compute anything a function can compute",
    "Generate an abstract plan of reasoning",
)
REFINE_MARKERS = (
    "Reasoning with values:",
    "Generate a response to a question by using a previous",
)
FAN_TAG = "[case=coa-fan]"
FAN_CHAIN = "\n".join(
    [
        'First [FUNC slow_tool("item1") = y1],',
        'then [FUNC slow_tool("item2") = y2] and',
        '[FUNC slow_tool("item3") = y3] independently;',
        "the follow-up uses the first: [FUNC slow_tool(y1) = y4].",
        "Then combine them.",
    ]
)
CHAT_TAG = "[case=coa-chat]"
CHAT_QUESTION = CHAT_TAG + " Turn {turn}: please reply briefly."
TURNS = 12


def fan_question() -> str:
    return f"{FAN_TAG} Look up item1, item2 and item3, then follow up on item1's result, and combine."


def cases(scenarios: Any) -> list[dict[str, Any]]:
    """(case, question, critical path): the whole chain arrives, its graph runs, then refine."""
    chain_end = TTFT + 4 * LINE  # five lines
    k8_end = TTFT + 8 * LINE  # eight placeholder lines and "Then combine them."
    return [
        {
            "case": "fan",
            "question": fan_question(),
            "path": chain_end + 2 * T_TOOL + TTFT,
            "levels": 2,
        },
        {
            "case": "k=8",
            "question": scenarios.question(8, "coa"),
            "path": k8_end + T_TOOL + TTFT,
            "levels": 1,
        },
    ]


def build_scenario(folder: Path) -> tuple[Path, Any]:
    """The peer's workload A (its k=8 CoA rules answer LlamaIndex's prompts), plus the same replies
    for our prompts, the fan case for both, and the conversation's instant plain answer."""
    os.environ["LINE_DELAY"] = str(LINE)
    scenarios = load_peer_module("make_scenarios")
    scenario = scenarios.parallel_scenario()
    k8_tag = scenarios.question(8, "coa").split(" ", 1)[0]
    k8_chain = next(r for r in scenario["rules"] if r["name"] == "coa-reason-k8")[
        "response"
    ]["text"]
    rules: list[dict[str, Any]] = [
        {
            "name": "chat",
            "match": {"last_user_contains": CHAT_TAG},
            "response": {"text": "Sure."},
            **INSTANT,
        }
    ]
    for marker in REASONING_MARKERS:
        rules.append(
            {
                "name": "fan-reason",
                "match": {"last_user_contains": [marker, FAN_TAG]},
                "response": {"text": FAN_CHAIN},
                **TIMING,
            }
        )
        if marker == REASONING_MARKERS[0]:
            rules.append(
                {
                    "name": "k8-reason",
                    "match": {"last_user_contains": [marker, k8_tag]},
                    "response": {"text": k8_chain},
                    **TIMING,
                }
            )
    for marker in REFINE_MARKERS:
        rules.append(
            {
                "name": "fan-refine",
                "match": {"last_user_contains": [marker, FAN_TAG]},
                "response": {"text": "Combined 4 results."},
                **TIMING,
            }
        )
        if marker == REFINE_MARKERS[0]:
            rules.append(
                {
                    "name": "k8-refine",
                    "match": {"last_user_contains": [marker, k8_tag]},
                    "response": {"text": "Combined 8 results."},
                    **TIMING,
                }
            )
    scenario["rules"] = rules + scenario["rules"]
    path = folder / "scenario.json"
    path.write_text(json.dumps(scenario, indent=1))
    return path, scenarios


# --- our side ---------------------------------------------------------------------------------------


def make_llm(base_url: str) -> OpenAI:
    return OpenAI(
        model="gpt-4o-mini",
        api_base=base_url,
        api_key="sk-fake",
        max_retries=0,
        timeout=60,
    )


async def run_ours(
    base_url: str, all_cases: list[dict[str, Any]], kinds: list[str], runs: int
) -> list[dict[str, Any]]:
    llm = make_llm(base_url)
    warm = CoAAgentWorker.from_tools(
        [sleeping_tool("slow_tool", T_TOOL, "async", Spans())], llm=llm
    )
    await AgentRunner(warm).achat(
        all_cases[0]["question"]
    )  # untimed: client, first connection
    rows = []
    for kind in kinds:
        for case in all_cases:
            for run in range(runs):
                spans = Spans()
                worker = CoAAgentWorker.from_tools(
                    [sleeping_tool("slow_tool", T_TOOL, kind, spans)], llm=llm
                )
                start = time.perf_counter()
                try:
                    answer, error = (
                        (await AgentRunner(worker).achat(case["question"])).response,
                        None,
                    )
                except Exception as exc:  # noqa: BLE001 - a failed run is a result to report
                    answer, error = None, f"{type(exc).__name__}: {exc}"[:300]
                wall = time.perf_counter() - start
                conc = spans.max_concurrency()
                rows.append(
                    {
                        "side": "ours",
                        "case": case["case"],
                        "tool": kind,
                        "run": run,
                        "wall_s": wall,
                        "answer": answer,
                        "error": error,
                        "concurrency": conc,
                    }
                )
                print(
                    f"ours  {kind:5s} {case['case']:4s} run{run} wall={wall:.3f}s conc={conc} err={error}",
                    flush=True,
                )
    return rows


async def conversation_ours(base_url: str, turns: int) -> list[dict[str, Any]]:
    noop = FunctionTool.from_defaults(
        lambda x: "pong", name="noop_tool", description="Returns pong."
    )
    agent = AgentRunner(CoAAgentWorker.from_tools([noop], llm=make_llm(base_url)))
    rows = []
    for turn in range(turns):
        start = time.perf_counter()
        response = await agent.achat(CHAT_QUESTION.format(turn=turn))
        rows.append(
            {
                "turn": turn + 1,
                "ms": (time.perf_counter() - start) * 1000,
                "history": len(agent.chat_history),
                "answer": response.response[:80],
            }
        )
    return rows


# --- LlamaIndex's side ------------------------------------------------------------------------------


def run_llamaindex(
    python: Path,
    base_url: str,
    all_cases: list[dict[str, Any]],
    kinds: list[str],
    runs: int,
    turns: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    command = [
        str(python),
        "-W",
        "ignore",
        "-m",
        "bench.llamaindex_coa_driver",
        "--peer-dir",
        str(PEER_DIR),
        "--base-url",
        base_url,
        "--cases",
        json.dumps([{"case": c["case"], "question": c["question"]} for c in all_cases]),
        "--tools",
        ",".join(kinds),
        "--runs",
        str(runs),
        "--turns",
        str(turns),
        "--chat-question",
        CHAT_QUESTION,
    ]
    rows: list[dict[str, Any]] = []
    chat: list[dict[str, Any]] = []
    for row in driver_rows(command):
        if row["case"] == "conversation":
            chat = row["turns"]
            continue
        rows.append({"side": "llamaindex", **row})
        print(
            f"llama {row['tool']:5s} {row['case']:4s} run{row['run']} wall={row['wall_s']:.3f}s err={row['error']}",
            flush=True,
        )
    return rows, chat


# --- report -----------------------------------------------------------------------------------------


def report(
    rows: list[dict[str, Any]],
    all_cases: list[dict[str, Any]],
    kinds: list[str],
    runs: int,
    ours_chat: list[dict[str, Any]],
    li_chat: list[dict[str, Any]],
    li_note: str,
) -> str:
    out = [
        f"replies: first token after {TTFT} s, then one line per {LINE * 1000:.0f} ms; slow_tool sleeps {T_TOOL} s; "
        f"median wall seconds of {runs} run(s)",
        "critical path = the whole chain has arrived + the placeholder graph's longest path + the refine reply",
        "",
        "| tool | case | ours | critical path | ours − path | target met (5% or 50 ms) | LlamaIndex CoA pack | "
        "LlamaIndex ÷ ours | max concurrent tools (ours) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in kinds:
        for case in all_cases:
            wall = median(rows, side="ours", case=case["case"], tool=kind)
            li = median(rows, side="llamaindex", case=case["case"], tool=kind)
            path = case["path"]
            conc = max(
                (
                    r["concurrency"]
                    for r in rows
                    if r["side"] == "ours"
                    and r["case"] == case["case"]
                    and r["tool"] == kind
                ),
                default=0,
            )
            out.append(
                f"| {kind} | {case['case']} | {_cell(wall)} | {path:.2f} | {_cell(wall - path if wall else None, '{:+.3f}')} | "
                f"{'yes' if wall and within_target(wall, path) else 'NO'} | {_cell(li)} | "
                f"{_cell(li / wall if li and wall else None, '{:.2f}×')} | {conc} |"
            )
    out += [
        "",
        f"{TURNS}-turn conversation, one agent, zero-latency plain answers: ms per turn (history messages after it)",
        "",
        "| turn | ours ms | ours history | LlamaIndex ms | LlamaIndex history |",
        "|---|---|---|---|---|",
    ]
    for i in range(max(len(ours_chat), len(li_chat))):
        o = ours_chat[i] if i < len(ours_chat) else None
        li_row = li_chat[i] if i < len(li_chat) else None
        out.append(
            f"| {i + 1} | {_cell(o['ms'] if o else None, '{:.1f}')} | {o['history'] if o else '–'} | "
            f"{_cell(li_row['ms'] if li_row else None, '{:.1f}')} | {li_row['history'] if li_row else '–'} |"
        )
    if ours_chat:
        first, last = ours_chat[: len(ours_chat) // 2], ours_chat[len(ours_chat) // 2 :]
        out.append(
            f"\nours: turns 1–{len(first)} mean {statistics.fmean(r['ms'] for r in first):.1f} ms, "
            f"turns {len(first) + 1}–{len(ours_chat)} mean {statistics.fmean(r['ms'] for r in last):.1f} ms"
        )
    return "\n".join(out + report_footer(rows, li_note))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tools", default="async,sync")
    parser.add_argument("--no-llamaindex", action="store_true")
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every run here"
    )
    args = parser.parse_args()
    kinds = args.tools.split(",")
    started = time.time()
    python, li_note = (
        (None, "LlamaIndex column skipped (--no-llamaindex)")
        if args.no_llamaindex
        else llamaindex_python()
    )
    li_chat: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-coa-") as folder:
        script, scenarios = build_scenario(Path(folder))
        all_cases = cases(scenarios)
        server = FakeServer(script)
        try:
            print(f"fake server {server.base_url}, scenario {script}", flush=True)
            rows = asyncio.run(run_ours(server.base_url, all_cases, kinds, args.runs))
            ours_chat = asyncio.run(conversation_ours(server.base_url, TURNS))
            if python is not None:
                li_rows, li_chat = run_llamaindex(
                    python, server.base_url, all_cases, kinds, args.runs, TURNS
                )
                rows += li_rows
        finally:
            server.close()
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": rows, "ours_chat": ours_chat, "li_chat": li_chat}, indent=1
            )
        )
    print()
    print(report(rows, all_cases, kinds, args.runs, ours_chat, li_chat, li_note))
    print(
        f"\n(bench took {time.time() - started:.0f} s on {os.cpu_count()} CPUs, Python {sys.version.split()[0]})"
    )


if __name__ == "__main__":
    main()
