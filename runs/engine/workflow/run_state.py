"""What a workflow run keeps between steps, stored in ``task.extra_state`` (so undo restores it)."""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel, Field

from ..errors import WorkflowConfigError
from ..events import InputRequiredEvent
from ..types import Task, TaskStep

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
        """A copy of the run state kept on ``task``: a step edits its own, saved when it ends."""
        return cls.model_validate(copy.deepcopy(task.extra_state[KEY]))

    def save(self, task: Task) -> None:
        task.extra_state[KEY] = self.model_dump(mode="json")

    def carried(self) -> WorkflowRunState:
        """What the next run of the same conversation starts from (no open questions or answers)."""
        return WorkflowRunState(
            current_agent=self.current_agent,
            state=copy.deepcopy(self.state),
            store=copy.deepcopy(self.store),
        )

    def check_saveable(self) -> None:
        """Refuse, naming the key, shared state or a tool's value that is no longer JSON data.

        What ``ctx.get`` returns is the value itself, so code may have edited it in place into
        something a saved run cannot hold.
        """
        for where, values in (("state", self.state), ("value", self.store)):
            for key, value in values.items():
                try:
                    json.dumps(value)
                except (TypeError, ValueError) as exc:
                    raise WorkflowConfigError(
                        f"the workflow's {where} under {key!r} is no longer JSON data ({exc}): "
                        "what ctx.get returns is kept as it is edited in place, and must stay "
                        "JSON so the run can be saved"
                    ) from None


def question_waiters(step: TaskStep) -> list[str]:
    """The waiter ids of the questions a question step (kind ``human_input``) answers."""
    return [str(waiter) for waiter in step.step_state.get("questions", [])]
