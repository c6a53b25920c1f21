"""The ``handoff`` tool: how an agent passes the conversation to another agent."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..tools import FunctionTool
from .agents import HANDOFF_TOOL_NAME, BaseWorkflowAgent
from .context import Context
from .prompts import fill

if TYPE_CHECKING:
    from .workflow import AgentWorkflow


def reachable(workflow: AgentWorkflow, agent: BaseWorkflowAgent) -> list[str]:
    """The agents ``agent`` may hand off to, in the workflow's order."""
    allowed = agent.can_handoff_to
    return [
        name
        for name in workflow.agents
        if name != agent.name and (allowed is None or name in allowed)
    ]


def handoff_tool(
    workflow: AgentWorkflow, agent: BaseWorkflowAgent
) -> FunctionTool | None:
    """``handoff(to_agent, reason)`` listing only the agents ``agent`` may reach; None if it reaches none."""
    allowed = reachable(workflow, agent)
    if not allowed:
        return None
    agent_info = json.dumps(
        {name: workflow.agents[name].description for name in allowed}
    )

    async def handoff(ctx: Context, to_agent: str, reason: str) -> str:
        """Hand the conversation to another agent, saying why."""
        if to_agent not in allowed:
            why = (
                f"{agent.name} may not hand off to {to_agent!r}"
                if to_agent in workflow.agents
                else f"there is no agent named {to_agent!r}"
            )
            raise ValueError(f"{why}; you may hand off to: {', '.join(allowed)}")
        run = ctx._run_state()
        run.handoff_to, run.handoff_reason = to_agent, reason
        return f"Agent {to_agent} now handles the request (reason: {reason}). {to_agent}: please continue with it."

    return FunctionTool.from_defaults(
        async_fn=handoff,
        name=HANDOFF_TOOL_NAME,
        description=fill(workflow.handoff_prompt, agent_info=agent_info),
    )
