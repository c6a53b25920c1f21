"""The parts of a ReAct agent's reasoning: Thought + Action, Observation, Thought + Answer.

Kept as typed parts, not only as text: the worker stores them with the task, emits each as an
``AgentReasoning`` event, and the page draws each kind on its own. The names follow LlamaIndex's
``BaseReasoningStep`` family, so parsers written for it work here.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter


class BaseReasoningStep(BaseModel):
    """One part of the reasoning; ``get_content`` is its text in the ReAct protocol."""

    def get_content(self) -> str:
        raise NotImplementedError

    @property
    def is_done(self) -> bool:
        """Whether this part ends the reasoning (an answer, or a tool that answers directly)."""
        return False


class ActionReasoningStep(BaseReasoningStep):
    """The model thought and chose a tool with arguments."""

    kind: Literal["action"] = "action"
    thought: str
    action: str
    action_input: dict[str, Any] = Field(default_factory=dict)

    def get_content(self) -> str:
        return f"Thought: {self.thought}\nAction: {self.action}\nAction Input: {json.dumps(self.action_input)}"


class ObservationReasoningStep(BaseReasoningStep):
    """What came back: a tool's result, an error the model must fix, or a person's words."""

    kind: Literal["observation"] = "observation"
    observation: str
    return_direct: bool = False
    is_error: bool = False
    tool_name: str | None = (
        None  # None: not from a tool (a reply that could not be read, feedback)
    )

    def get_content(self) -> str:
        return f"Observation: {self.observation}"

    @property
    def is_done(self) -> bool:
        return self.return_direct


class ResponseReasoningStep(BaseReasoningStep):
    """The model's final thought and answer."""

    kind: Literal["response"] = "response"
    thought: str
    response: str
    is_streaming: bool = False

    def get_content(self) -> str:
        return f"Thought: {self.thought}\nAnswer: {self.response}"

    @property
    def is_done(self) -> bool:
        return True


ReasoningStep = Annotated[
    ActionReasoningStep | ObservationReasoningStep | ResponseReasoningStep,
    Field(discriminator="kind"),
]
REASONING_ADAPTER: TypeAdapter[ReasoningStep] = TypeAdapter(ReasoningStep)


def load_reasoning(items: list[Any]) -> list[BaseReasoningStep]:
    """Reasoning parts from their stored JSON (parts that are already objects pass through)."""
    return [
        item
        if isinstance(item, BaseReasoningStep)
        else REASONING_ADAPTER.validate_python(item)
        for item in items
    ]


def dump_reasoning(steps: list[BaseReasoningStep]) -> list[dict[str, Any]]:
    return [step.model_dump(mode="json") for step in steps]
