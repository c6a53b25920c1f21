"""What a workflow run keeps between steps, stored in ``task.extra_state`` (so undo restores it)."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, Field

from ..events import InputRequiredEvent
from ..types import Task

KEY = "workflow"


class OpenQuestion(BaseModel):
    """A question a tool asked the person that has not been answered yet."""

    waiter_id: str
    prefix: str
    tool_id: str | None = None
    tool_name: str | None = None
    agent: str
    step_id: str | None = None  # the step whose call asked it

    def event(self, task_id: str) -> InputRequiredEvent:
        """The question as it is announced."""
        return InputRequiredEvent(
            task_id=task_id,
            step_id=self.step_id,
            prefix=self.prefix,
            waiter_id=self.waiter_id,
            tool_id=self.tool_id,
            tool_name=self.tool_name,
            current_agent_name=self.agent,
        )


class WorkflowRunState(BaseModel):
    """The shared state, the current agent, and the person's open questions and answers."""

    current_agent: str
    state: dict[str, Any] = Field(default_factory=dict)
    # values tools keep with ctx.set(key, value) under other keys than "state"
    store: dict[str, Any] = Field(default_factory=dict)
    # the person's answers by waiter id; kept while the calls that asked are re-run, dropped after
    answers: dict[str, str] = Field(default_factory=dict)
    questions: dict[str, OpenQuestion] = Field(default_factory=dict)
    # set by the handoff tool during a step; applied once the step's calls are done
    handoff_to: str | None = None
    handoff_reason: str = ""

    @classmethod
    def of(cls, task: Task) -> WorkflowRunState:
        return cls.model_validate(task.extra_state[KEY])

    def save(self, task: Task) -> None:
        task.extra_state[KEY] = self.model_dump(mode="json")

    def carried(self) -> WorkflowRunState:
        """What the next run of the same conversation starts from (no open questions or answers)."""
        return WorkflowRunState(
            current_agent=self.current_agent,
            state=copy.deepcopy(self.state),
            store=copy.deepcopy(self.store),
        )
