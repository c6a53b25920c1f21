"""The workload of bench/bench_client.py, stdlib only so the LlamaIndex driver builds the same.

A conversation of ``turns`` turns (a user question and an assistant answer each, ~540 bytes per
message on average, so 400 messages make a ~215 KB body, as in issue 15), and a scenario for the
peer's fake server: a short streamed reply for every call, and ``LONG_WORDS`` word-sized chunks
for a message carrying ``LONG_TAG``.
"""

from __future__ import annotations

from typing import Any

MODEL = "gpt-4o-mini"
LONG_TAG = "[long]"
LONG_WORDS = 2000
SHORT_REPLY = "Noted - here is a short answer."

_WORDS = (
    "revenue region quarter margin churn cohort forecast variance median outlier "
    "customer segment pipeline report table chart growth decline baseline target"
).split()


def _text(seed: int, words: int) -> str:
    return " ".join(_WORDS[(seed * 7 + i * 3) % len(_WORDS)] for i in range(words))


def turn_messages(turn: int) -> list[dict[str, str]]:
    """Turn ``turn``'s user message and assistant answer, as chat completions dicts."""
    return [
        {"role": "user", "content": f"Question {turn}: " + _text(turn, 40)},
        {"role": "assistant", "content": f"Answer {turn}: " + _text(turn + 1, 110)},
    ]


def history(turns: int) -> list[dict[str, str]]:
    out = [{"role": "system", "content": "You are a data analyst. " + _text(0, 30)}]
    for turn in range(turns):
        out += turn_messages(turn)
    return out


def scenario() -> dict[str, Any]:
    return {
        "defaults": {
            "latency_s": 0,
            "ttft_s": 0,
            "token_delay_s": 0,
            "chunking": "token",
        },
        "on_no_match": {"text": SHORT_REPLY},
        "rules": [
            {
                "name": "long",
                "match": {"last_user_contains": LONG_TAG},
                "response": {"text": _text(3, LONG_WORDS)},
            },
            {"name": "short", "match": {}, "response": {"text": SHORT_REPLY}},
        ],
    }
