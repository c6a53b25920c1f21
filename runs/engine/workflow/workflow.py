"""AgentWorkflow: several agents sharing one conversation and state, passing control by handoff."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import WorkflowConfigError
from ..llms.base import LLM
from ..memory import ChatMemoryBuffer
from ..messages import ChatMessage
from ..tools import BaseTool
from .agents import BaseWorkflowAgent, FunctionAgent
from .context import Context
from .handler import WorkflowHandler
from .handoff import handoff_tool
from .options import RunSlots, WorkflowOptions
from .prompts import Prompt, checked_handoff_prompt, checked_state_prompt
from .react_agent import ReActAgent
from .run_state import WorkflowRunState
from .worker import AgentWorkflowWorker


class AgentWorkflow:
    """Agents that hand the conversation to each other; ``run`` returns a WorkflowHandler.

    Each agent turn is one TaskStep of ``worker`` (an AgentWorker), so an AgentRunner over it
    steps, edits, approves and undoes multi-agent runs like single-agent ones.
    """

    def __init__(
        self,
        agents: Sequence[BaseWorkflowAgent],
        initial_state: dict[str, Any] | None = None,
        root_agent: str | None = None,
        handoff_prompt: Prompt | None = None,
        state_prompt: Prompt | None = None,
        timeout: float | None = None,
        **workflow_kwargs: Any,
    ) -> None:
        """``workflow_kwargs`` are LlamaIndex's ``Workflow`` options: ``verbose`` (each run's
        runner prints its steps), ``num_concurrent_runs`` (how many runs of this workflow go on at
        once; others wait their turn) and ``disable_validation`` (accepted: there is no graph of
        steps to validate here). Any other is refused, naming it."""
        options = WorkflowOptions.of(workflow_kwargs)
        if not agents:
            raise WorkflowConfigError("At least one agent must be provided")
        self.agents: dict[str, BaseWorkflowAgent] = {}
        for agent in agents:
            if agent.name in self.agents:
                raise WorkflowConfigError(f"two agents are named {agent.name!r}")
            self.agents[agent.name] = agent
        if len(agents) == 1:
            root_agent = agents[0].name
        elif root_agent is None:
            raise WorkflowConfigError(
                "Exactly one root agent must be provided (root_agent=…) when there are several"
            )
        if root_agent not in self.agents:
            raise WorkflowConfigError(
                f"Root agent {root_agent} not found in provided agents: {', '.join(self.agents)}"
            )
        for agent in agents:
            unknown = [n for n in agent.can_handoff_to or [] if n not in self.agents]
            if unknown:
                raise WorkflowConfigError(
                    f"agent {agent.name!r} may hand off to unknown agent(s): {', '.join(unknown)}"
                )
        self.root_agent = root_agent
        try:
            self.initial_state: dict[str, Any] = json.loads(
                json.dumps(initial_state or {})
            )
        except (TypeError, ValueError) as exc:
            raise WorkflowConfigError(
                f"initial_state must be JSON data so runs can be saved ({exc})"
            ) from None
        self.handoff_prompt = checked_handoff_prompt(handoff_prompt)
        self.state_prompt = checked_state_prompt(state_prompt)
        if timeout is not None and timeout <= 0:
            raise WorkflowConfigError(
                "timeout must be a positive number of seconds (or None)"
            )
        self.timeout = timeout
        self.verbose = options.verbose
        self.num_concurrent_runs = options.num_concurrent_runs
        self.disable_validation = options.disable_validation
        self._run_slots = RunSlots(options.num_concurrent_runs)
        self.worker = AgentWorkflowWorker(self)
        self._handoff_tools = {
            name: handoff_tool(self, agent) for name, agent in self.agents.items()
        }

    @classmethod
    def from_tools_or_functions(
        cls,
        tools_or_functions: Sequence[BaseTool | Callable[..., Any]],
        llm: LLM | None = None,
        system_prompt: str | None = None,
        state_prompt: Prompt | None = None,
        initial_state: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AgentWorkflow:
        """One agent with these tools: a FunctionAgent if ``llm`` does function calling, else a ReActAgent."""
        if llm is None:
            from ..llms.openai import OpenAI

            llm = OpenAI()
        agent: BaseWorkflowAgent
        if llm.metadata.is_function_calling_model:
            agent = FunctionAgent(
                name="Agent",
                tools=tools_or_functions,
                llm=llm,
                system_prompt=system_prompt,
            )
        else:
            agent = ReActAgent(
                name="Agent",
                tools=tools_or_functions,
                llm=llm,
                system_prompt=system_prompt,
            )
        return cls(
            [agent],
            initial_state=initial_state,
            state_prompt=state_prompt,
            timeout=timeout,
        )

    def fresh_run_state(self) -> WorkflowRunState:
        """Where a new conversation starts: the root agent and a copy of the initial state."""
        return WorkflowRunState(
            current_agent=self.root_agent, state=copy.deepcopy(self.initial_state)
        )

    def handoff_tools(self, agent: BaseWorkflowAgent) -> list[BaseTool]:
        """``agent``'s handoff tool, if it may reach another agent."""
        handoff = self._handoff_tools[agent.name]
        return [handoff] if handoff is not None else []

    async def tools_for(self, agent: BaseWorkflowAgent, query: str) -> list[BaseTool]:
        """The tools ``agent`` is offered for a turn: its own, retrieved ones, and its handoff tool."""
        return [*await agent.tools_for(query), *self.handoff_tools(agent)]

    def run(
        self,
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        memory: ChatMemoryBuffer | None = None,
        ctx: Context | None = None,
        approve_tool_calls: bool = False,
    ) -> WorkflowHandler:
        """Start a run (call inside an event loop). Without user_msg/chat_history, ``ctx``'s unfinished run resumes."""
        ctx = ctx if ctx is not None else Context(self)
        start = ctx._session.start(user_msg, chat_history, memory, approve_tool_calls)
        return WorkflowHandler(ctx, start, self.timeout, self._run_slots)
