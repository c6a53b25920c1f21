"""What an LLMCompiler task remembers between rounds, kept in ``task.extra_state`` as plain JSON.

The runner snapshots ``extra_state`` before every step and restores it on undo or failure, so
keeping the rounds there (and nothing on the worker) makes undoing a replanning round exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ...tools import ToolOutput
from ...types import Task
from .plan import PlannedCall

STATE_KEY = "llm_compiler"


class RoundRecord(BaseModel):
    """One planning round: its plan, every call with its result, and what the joiner concluded."""

    round: int
    plan: str = ""
    calls: list[PlannedCall] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    thought: str | None = None
    replan_reason: str | None = None

    def outputs(self) -> dict[int, ToolOutput]:
        """Results of this round's calls, by plan index."""
        return {
            call.index: call.output for call in self.calls if call.output is not None
        }


class CompilerState(BaseModel):
    """The task's question, where its conversation history ends, and the rounds so far."""

    question: str = ""
    history_length: int = 0
    rounds: list[RoundRecord] = Field(default_factory=list)

    @classmethod
    def load(cls, task: Task) -> CompilerState:
        """The state kept on ``task`` (empty before the first round)."""
        return cls.model_validate(task.extra_state.get(STATE_KEY) or {})

    def save(self, task: Task) -> None:
        """Store the state on ``task`` as plain JSON data."""
        task.extra_state[STATE_KEY] = self.model_dump(mode="json")

    def outputs(self) -> dict[int, ToolOutput]:
        """Results of every call of every recorded round, by plan index."""
        merged: dict[int, ToolOutput] = {}
        for record in self.rounds:
            merged.update(record.outputs())
        return merged

    def next_index(self) -> int:
        """The number the next round's first call gets (numbering continues across rounds)."""
        indices = [call.index for record in self.rounds for call in record.calls]
        return max(indices, default=0) + 1


def _call_lines(call: PlannedCall) -> list[str]:
    lines = [f"Thought: {call.thought}"] if call.thought else []
    lines.append(
        f"{call.index}. {call.line}"
        if call.line
        else f"{call.index}. {call.tool_name}(...)"
    )
    if call.output is not None:
        lines.append(f"Observation: {call.output.content}")
    elif call.error:
        lines.append(f"Observation: Error: {call.error}")
    return lines


def format_rounds(rounds: Sequence[RoundRecord], with_conclusions: bool = True) -> str:
    """The rounds as text for the joiner and the replanner: calls, results, problems, conclusions."""
    blocks = []
    for record in rounds:
        lines = [f"Round {record.round}:"]
        for call in record.calls:
            lines.extend(_call_lines(call))
        if not record.calls:
            lines.append("(no calls)")
        for problem in record.problems:
            lines.append(f"Problem with this plan: {problem}")
        if with_conclusions and record.thought:
            lines.append(f"Thought after this round: {record.thought}")
        if with_conclusions and record.replan_reason:
            lines.append(f"Why a new plan was needed: {record.replan_reason}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
