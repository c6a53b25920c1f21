"""ReActAgent: a workflow agent that reasons in text (the ReAct worker's parser and formatter).

Its Thought/Action replies and the Observations go into the shared conversation as they happen
(assistant text, then a user "Observation: …" message), so the next agent after a handoff reads
the exchange as it was. Works with models that have no function calling.
"""

from __future__ import annotations

from typing import Any

from ..messages import ChatMessage, ToolSelection
from ..reasoning import (
    ActionReasoningStep,
    ObservationReasoningStep,
    ResponseReasoningStep,
)
from ..tools import BaseTool, ToolOutput
from ..types import PendingToolCall, Task, TaskStep, new_id
from ..workers.llm_turn import stream_turn
from ..workers.react.formatter import ReActChatFormatter
from ..workers.react.parser import ReActOutputParser, ReActParseError
from .agents import AgentTurn, BaseWorkflowAgent

STOP = ["Observation:"]  # the model must not write the tool's result itself


class ReActAgent(BaseWorkflowAgent):
    """An agent following the ReAct text protocol; its ``system_prompt`` becomes the prompt's context."""

    def __init__(
        self,
        *args: Any,
        formatter: ReActChatFormatter | None = None,
        output_parser: ReActOutputParser | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.formatter = formatter or ReActChatFormatter.from_defaults()
        self.output_parser = output_parser or ReActOutputParser()

    def llm_input(self, history: list[ChatMessage]) -> list[ChatMessage]:
        return history  # the system prompt goes into the ReAct header instead

    async def take_turn(
        self,
        task: Task,
        step: TaskStep,
        history: list[ChatMessage],
        tools: list[BaseTool],
    ) -> AgentTurn:
        formatter = ReActChatFormatter(
            self.formatter.system_header, self.system_prompt or ""
        )
        messages = formatter.format(tools, history)
        reply = await stream_turn(
            self.llm, task, step, messages, stop=STOP, agent_name=self.name
        )
        text = reply.message.text
        said = ChatMessage.assistant(text)
        try:
            part = self.output_parser.parse(text)
        except ReActParseError as exc:
            retry = ObservationReasoningStep(
                observation=f"Error: I could not read your reply: {exc}", is_error=True
            )
            return AgentTurn(
                message=said,
                tool_calls=[],
                text=text,
                usage=reply.usage,
                extra_messages=[ChatMessage.user(retry.get_content())],
                go_on=True,
            )
        if isinstance(part, ActionReasoningStep):
            call = ToolSelection(
                tool_id=f"react_{new_id()[:12]}",
                tool_name=part.action,
                tool_kwargs=part.action_input,
            )
            return AgentTurn(
                message=said, tool_calls=[call], text=text, usage=reply.usage
            )
        answer = part.response if isinstance(part, ResponseReasoningStep) else text
        return AgentTurn(message=said, tool_calls=[], text=answer, usage=reply.usage)

    def result_messages(
        self, calls: list[PendingToolCall], outputs: list[ToolOutput]
    ) -> list[ChatMessage]:
        return [
            ChatMessage.user(
                ObservationReasoningStep(observation=out.content).get_content()
            )
            for out in outputs
        ]
