"""Building the messages of a ReAct model call from the conversation and the reasoning so far."""

from __future__ import annotations

from collections.abc import Sequence

from ...messages import ChatMessage
from ...reasoning import BaseReasoningStep, ObservationReasoningStep
from ...tools import BaseTool
from .prompts import CONTEXT_SECTION, REACT_CHAT_SYSTEM_HEADER


def tool_descriptions(tools: Sequence[BaseTool]) -> str:
    lines = []
    for tool in tools:
        meta = tool.metadata
        lines.append(f"> {meta.signature()}: {meta.description}")
    return "\n".join(lines) or "(no tools: answer directly)"


class ReActChatFormatter:
    """System header with the tools, then the conversation, then this task's reasoning.

    Each Thought/Action (or Answer) goes back to the model as its own assistant message and each
    Observation as a user message, so the model sees the exchange as it happened.
    """

    def __init__(
        self, system_header: str = REACT_CHAT_SYSTEM_HEADER, context: str = ""
    ) -> None:
        self.system_header = system_header
        self.context = context

    @classmethod
    def from_defaults(
        cls, system_header: str | None = None, context: str | None = None
    ) -> ReActChatFormatter:
        return cls(
            system_header=system_header or REACT_CHAT_SYSTEM_HEADER,
            context=context or "",
        )

    def system_prompt(self, tools: Sequence[BaseTool]) -> str:
        names = ", ".join(tool.metadata.name for tool in tools) or "(none)"
        header = self.system_header.format(
            tool_desc=tool_descriptions(tools), tool_names=names
        )
        if self.context:
            header += CONTEXT_SECTION.format(context=self.context)
        return header

    def format(
        self,
        tools: Sequence[BaseTool],
        chat_history: Sequence[ChatMessage],
        current_reasoning: Sequence[BaseReasoningStep] | None = None,
    ) -> list[ChatMessage]:
        messages = [ChatMessage.system(self.system_prompt(tools)), *chat_history]
        for part in current_reasoning or []:
            if isinstance(part, ObservationReasoningStep):
                messages.append(ChatMessage.user(part.get_content()))
            else:
                messages.append(ChatMessage.assistant(part.get_content()))
        return messages
