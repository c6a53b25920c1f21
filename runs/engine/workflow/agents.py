"""The agents of a workflow: configuration (name, tools, whom it may hand off to) and how one turn runs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import WorkflowConfigError
from ..llms.base import LLM
from ..messages import ChatMessage, TokenUsage, ToolSelection
from ..tools import BaseTool, FunctionTool, ToolOutput
from ..types import PendingToolCall, Task, TaskStep
from ..workers.llm_turn import stream_turn
from ..workers.tool_calls import tool_messages

HANDOFF_TOOL_NAME = "handoff"


class ToolRetriever(Protocol):
    """Picks extra tools for a turn from the latest user message."""

    async def aretrieve(self, query: str) -> Sequence[BaseTool]: ...


@dataclass
class AgentTurn:
    """What one model turn produced: the message for memory, the calls it chose, its answer text."""

    message: ChatMessage
    tool_calls: list[ToolSelection]
    text: str
    usage: TokenUsage | None = None
    extra_messages: list[ChatMessage] = field(default_factory=list)
    # no tool calls, yet not the answer: the agent takes another turn (a reply it must redo)
    go_on: bool = False


def as_tools(tools: Sequence[BaseTool | Callable[..., Any]] | None) -> list[BaseTool]:
    """Tools as given, with plain functions wrapped as FunctionTools."""
    return [
        t if isinstance(t, BaseTool) else FunctionTool.from_defaults(t)
        for t in tools or []
    ]


class BaseWorkflowAgent(ABC):
    """One agent of an AgentWorkflow. ``can_handoff_to``: None = any other agent, [] = none."""

    def __init__(
        self,
        name: str = "Agent",
        description: str = "An agent that can perform a task",
        system_prompt: str | None = None,
        tools: Sequence[BaseTool | Callable[..., Any]] | None = None,
        tool_retriever: ToolRetriever | None = None,
        can_handoff_to: Sequence[str] | None = None,
        llm: LLM | None = None,
    ) -> None:
        if not name or not name.strip():
            raise WorkflowConfigError("an agent needs a name")
        self.name = name
        self.description = description
        self.system_prompt = system_prompt
        self.tools = as_tools(tools)
        names = [t.metadata.name for t in self.tools]
        if HANDOFF_TOOL_NAME in names:
            raise WorkflowConfigError(
                f"agent {name!r}: the tool name {HANDOFF_TOOL_NAME!r} is reserved for handoffs"
            )
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise WorkflowConfigError(
                f"agent {name!r} has two tools named {', '.join(map(repr, twice))}"
            )
        self.tool_retriever = tool_retriever
        self.can_handoff_to = None if can_handoff_to is None else list(can_handoff_to)
        if llm is None:
            from ..llms.openai import OpenAI

            llm = OpenAI()
        self.llm = llm

    async def tools_for(self, query: str) -> list[BaseTool]:
        """This agent's tools for a turn, with any the retriever picks for ``query``."""
        if self.tool_retriever is None:
            return list(self.tools)
        retrieved = [
            t
            for t in await self.tool_retriever.aretrieve(query)
            if t.metadata.name != HANDOFF_TOOL_NAME
        ]
        own = {t.metadata.name for t in self.tools}
        return self.tools + [t for t in retrieved if t.metadata.name not in own]

    def llm_input(self, history: list[ChatMessage]) -> list[ChatMessage]:
        if self.system_prompt:
            return [ChatMessage.system(self.system_prompt), *history]
        return history

    def final_text(self, text: str) -> str:
        """The answer as the person should read it, from the final turn's text."""
        return text

    @abstractmethod
    async def take_turn(
        self,
        task: Task,
        step: TaskStep,
        history: list[ChatMessage],
        tools: list[BaseTool],
    ) -> AgentTurn:
        """One model call over the shared conversation; emits AgentInput/AgentStream/AgentOutput."""

    @abstractmethod
    def result_messages(
        self, calls: list[PendingToolCall], outputs: list[ToolOutput]
    ) -> list[ChatMessage]:
        """How the turn's tool results enter the shared conversation."""


class FunctionAgent(BaseWorkflowAgent):
    """An agent that picks tools through the model's function calling (needs a function-calling LLM)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.llm.metadata.is_function_calling_model:
            raise WorkflowConfigError(
                f"FunctionAgent {self.name!r} needs a function-calling model; "
                f"{self.llm.metadata.model_name!r} is not one (use ReActAgent for it)"
            )

    async def take_turn(
        self,
        task: Task,
        step: TaskStep,
        history: list[ChatMessage],
        tools: list[BaseTool],
    ) -> AgentTurn:
        reply = await stream_turn(
            self.llm,
            task,
            step,
            self.llm_input(history),
            tools=tools or None,
            agent_name=self.name,
        )
        message = reply.message
        return AgentTurn(
            message=message,
            tool_calls=list(message.tool_calls),
            text=message.text,
            usage=reply.usage,
        )

    def result_messages(
        self, calls: list[PendingToolCall], outputs: list[ToolOutput]
    ) -> list[ChatMessage]:
        return tool_messages(calls, outputs)
