"""Tools only a team of agents has: notes in the shared state, and questions to the person."""

from __future__ import annotations

from runs.engine import Context, HumanResponseEvent, InputRequiredEvent


async def save_note(ctx: Context, key: str, value: str) -> str:
    """Keep a note in the team's shared state under `key` (e.g. "plan", "finding", "review")."""
    state = await ctx.get("state")
    state[key] = value
    await ctx.set("state", state)
    return f"noted {key}"


async def ask_person(ctx: Context, question: str) -> str:
    """Ask the person a question and wait for the answer (use when only they can decide)."""
    answer = await ctx.wait_for_event(
        HumanResponseEvent, waiter_event=InputRequiredEvent(prefix=question)
    )
    return answer.response


TEAM_TOOLS = ("runs.presets.tools.team.save_note", "runs.presets.tools.team.ask_person")
