"""A three-agent team (research -> write -> review) on the scripted server, for the workflow tests."""

from __future__ import annotations

import json
from typing import Any

from engine_helpers import llm_for

from runs.engine import AgentWorkflow, Context, FunctionAgent
from runs.engine.events import AgentEvent
from runs.engine.testing import Match, Reply, Rule, ScriptedServer, ToolCallSpec

RESEARCHER = "You research facts."
WRITER = "You write the report."
REVIEWER = "You review the report."


async def record_notes(ctx: Context, notes: str) -> str:
    """Keep research notes in the shared state."""
    state = await ctx.get("state")
    state["notes"] = notes
    await ctx.set("state", state)
    return "notes recorded"


async def write_report(ctx: Context, report: str) -> str:
    """Keep the report draft in the shared state."""
    state = await ctx.get("state")
    state["report"] = report
    await ctx.set("state", state)
    return "draft saved"


def call(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


def team_rules() -> list[Rule]:
    """research notes, hand off to writer, write, hand off to reviewer, reviewer answers."""
    return [
        Rule(
            name="r1",
            match=Match(system_contains=RESEARCHER, tool_results_since_user=0),
            reply=call("record_notes", notes="Lagos: 15M people"),
        ),
        Rule(
            name="r2",
            match=Match(system_contains=RESEARCHER, tool_results_since_user=1),
            reply=call("handoff", to_agent="writer", reason="notes are ready"),
        ),
        Rule(
            name="w1",
            match=Match(system_contains=WRITER, tool_results_since_user=2),
            reply=call("write_report", report="Lagos has 15M people."),
        ),
        Rule(
            name="w2",
            match=Match(system_contains=WRITER, tool_results_since_user=3),
            reply=call("handoff", to_agent="reviewer", reason="draft done"),
        ),
        Rule(
            name="v1",
            match=Match(system_contains=REVIEWER),
            reply=Reply(text="Reviewed: Lagos has 15M people."),
        ),
    ]


def team(server: ScriptedServer, **workflow_kwargs: Any) -> AgentWorkflow:
    llm = llm_for(server)
    agents = [
        FunctionAgent(
            name="researcher",
            description="Finds facts",
            system_prompt=RESEARCHER,
            tools=[record_notes],
            llm=llm,
            can_handoff_to=["writer"],
        ),
        FunctionAgent(
            name="writer",
            description="Writes the report",
            system_prompt=WRITER,
            tools=[write_report],
            llm=llm,
            can_handoff_to=["reviewer", "researcher"],
        ),
        FunctionAgent(
            name="reviewer",
            description="Checks the report",
            system_prompt=REVIEWER,
            llm=llm,
            can_handoff_to=["writer"],
        ),
    ]
    kwargs: dict[str, Any] = {
        "root_agent": "researcher",
        "initial_state": {"notes": "", "report": ""},
    }
    kwargs.update(workflow_kwargs)
    return AgentWorkflow(agents, **kwargs)


async def collect(handler: Any) -> tuple[list[AgentEvent], Any]:
    events = [ev async for ev in handler.stream_events()]
    return events, await handler


def assert_valid_openai_sequence(messages: list[dict[str, Any]]) -> None:
    """Every assistant message with tool_calls is followed by one tool message per call id."""
    for i, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        ids = {c["id"] for c in message["tool_calls"]}
        following = []
        for later in messages[i + 1 :]:
            if later.get("role") != "tool":
                break
            following.append(later["tool_call_id"])
        assert sorted(following) == sorted(ids), json.dumps(messages, indent=1)
