"""The three-agent handoff scenario both AgentWorkflow benchmarks run (stdlib only).

Agents researcher -> writer -> reviewer -> researcher ... each take one turn: one model call that
hands off to the next agent; the last turn answers. So a run of N turns is N model calls, N-1
handoff tool calls, and a conversation that grows by two messages a turn. The script is in the
peer harness's format (fake_openai.py), matched on the agent's system prompt and on how many tool
results follow the user message.
"""

from __future__ import annotations

from typing import Any

AGENTS = ("researcher", "writer", "reviewer")
SYSTEM = {name: f"You are the team's {name}." for name in AGENTS}
DESCRIPTION = {name: f"The team's {name}" for name in AGENTS}
QUESTION = "Write a short report on coffee sales, passing the work around the team."
ANSWER = "Done: the team passed the report around and it is finished."


def agent_of(turn: int) -> str:
    return AGENTS[turn % len(AGENTS)]


def script(turns: int) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    for turn in range(turns):
        agent = agent_of(turn)
        match = {"system_contains": SYSTEM[agent], "tool_results_since_user": turn}
        if turn == turns - 1:
            response: dict[str, Any] = {"text": ANSWER}
        else:
            target = agent_of(turn + 1)
            response = {
                "tool_calls": [
                    {
                        "name": "handoff",
                        "arguments": {
                            "to_agent": target,
                            "reason": f"turn {turn + 1} is yours",
                        },
                    }
                ]
            }
        rules.append({"name": f"turn-{turn}", "match": match, "response": response})
    return {
        "defaults": {"model": "gpt-4o-mini"},
        "on_no_match": "error",
        "rules": rules,
    }


def record_call_starts(clock: Any) -> list[tuple[float, float]]:
    """Patch the openai SDK (after bench_overhead.patch_openai_sdk_timer) to note, as each model
    call starts, ``(perf_counter, clock.t)``: a turn runs from one call's start to the next, and
    the SDK time within it is the difference of ``clock.t``. The same on both sides, and
    independent of when a consumer reads the event stream."""
    import time
    from contextvars import ContextVar

    import openai
    from openai.resources.chat.completions import completions as cc

    starts: list[tuple[float, float]] = []
    in_create: ContextVar[bool] = ContextVar("in_create", default=False)
    timed_create = cc.AsyncCompletions.create
    timed_post = openai.AsyncOpenAI.post

    async def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        starts.append((time.perf_counter(), clock.t))
        token = in_create.set(True)
        try:
            return await timed_create(self, *args, **kwargs)
        finally:
            in_create.reset(token)

    # agentui's client sends chat completions with the SDK's raw ``post`` (no ``create``):
    # note those starts too, but not the ``post`` that a ``create`` makes itself.
    async def post(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        if path.endswith("/chat/completions") and not in_create.get():
            starts.append((time.perf_counter(), clock.t))
        return await timed_post(self, path, *args, **kwargs)

    cc.AsyncCompletions.create = create  # type: ignore[method-assign]
    openai.AsyncOpenAI.post = post  # type: ignore[method-assign,assignment]
    return starts
