"""AgentWorkflow runs on the scripted server: handoffs, shared state, events, the final answer."""

from __future__ import annotations

from engine_helpers import llm_for, serving
from workflow_helpers import call, collect, team, team_rules

from runs.engine import (
    AgentHandoff,
    AgentInput,
    AgentOutput,
    AgentWorkflow,
    Context,
    FunctionAgent,
    StateChanged,
    ToolCall,
    ToolCallResult,
)
from runs.engine.testing import Match, Reply, Rule


async def test_three_agents_two_handoffs_and_state() -> None:
    with serving(*team_rules()) as server:
        workflow = team(server)
        handler = workflow.run(user_msg="Write a report on Lagos")
        events, result = await collect(handler)
    assert isinstance(result, AgentOutput)
    assert result.response.content == "Reviewed: Lagos has 15M people."
    assert result.current_agent_name == "reviewer"
    inputs = [e.current_agent_name for e in events if isinstance(e, AgentInput)]
    assert inputs == ["researcher", "researcher", "writer", "writer", "reviewer"]
    handoffs = [
        (e.from_agent, e.to_agent, e.reason)
        for e in events
        if isinstance(e, AgentHandoff)
    ]
    assert handoffs == [
        ("researcher", "writer", "notes are ready"),
        ("writer", "reviewer", "draft done"),
    ]
    changes = [sorted(e.changes) for e in events if isinstance(e, StateChanged)]
    assert changes == [["notes"], ["report"]]
    results = [e.tool_output.content for e in events if isinstance(e, ToolCallResult)]
    assert results[0] == "notes recorded"
    assert await handler.ctx.get("state") == {
        "notes": "Lagos: 15M people",
        "report": "Lagos has 15M people.",
    }
    assert await handler.ctx.get("current_agent_name") == "reviewer"
    # the state went into the user message through the state prompt
    first = server.requests[0].messages
    assert (
        "Current state" in first[-1]["content"]
        and "Write a report on Lagos" in first[-1]["content"]
    )


async def test_a_tool_can_write_its_own_events_into_the_stream() -> None:
    async def progress(ctx: Context, n: int) -> str:
        """Report progress while working."""
        ctx.write_event_to_stream(
            ToolCall(task_id="", tool_name="progress-note", tool_id=f"note-{n}")
        )
        return "done"

    rules = [
        Rule(match=Match(tool_results_since_user=0), reply=call("progress", n=1)),
        Rule(match=Match(tool_results_since_user=1), reply=Reply(text="ok")),
    ]
    with serving(*rules) as server:
        workflow = AgentWorkflow(
            [FunctionAgent(name="a", tools=[progress], llm=llm_for(server))]
        )
        events, _ = await collect(workflow.run(user_msg="go"))
    notes = [
        e for e in events if isinstance(e, ToolCall) and e.tool_name == "progress-note"
    ]
    assert len(notes) == 1 and notes[0].task_id and notes[0].step_id
