"""BaseAgentWorker: the step-wise agent algorithm the runner drives."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from .._sync import run_sync
from ..errors import ToolArgumentsError
from ..events import AgentEvent, AgentStream
from ..tools import BaseTool, schema_error
from ..types import Task, TaskStep, TaskStepOutput

if TYPE_CHECKING:
    from ..runner import AgentRunner


class BaseAgentWorker(ABC):
    """Turns one TaskStep into a TaskStepOutput. Holds no per-task state: that lives on the Task.

    Workers always stream from the model, emitting events through ``task.emit``; so ``arun_step``
    and ``astream_step`` are one run, and the runner's sync methods wrap the async ones.
    ``verbose`` makes the runner print each step's thoughts, tool calls and results;
    ``callback_manager`` (set by ``set_callback_manager`` or a runner given one) hears every event.
    """

    # whether a verbose worker's events (thoughts, tool calls, results) are printed by the
    # runner; a worker that prints its own reasoning leaves it False. (``verbose`` and
    # ``callback_manager`` are each worker's own attributes, set by its constructor.)
    verbose_events: bool = False

    def set_callback_manager(self, callback_manager: Any) -> None:
        """Use ``callback_manager`` (ours or LlamaIndex's) for this worker's events."""
        self.callback_manager = callback_manager

    def streams_answer(self, event: AgentStream) -> bool:
        """Whether this delta (phase None) is the start of the task's final answer.

        ``stream_step`` returns as soon as it is, with ``is_last`` True, and streams the rest.
        The default, False, makes ``stream_step`` return when the step ends.
        """
        return False

    @abstractmethod
    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        """The task's first step; may also set up ``task.extra_state``."""

    @abstractmethod
    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        """Run one step. Must leave ``task`` consistent if it raises (the runner rolls memory back)."""

    async def astream_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        return await self.arun_step(step, task, **kwargs)

    def run_step(self, step: TaskStep, task: Task, **kwargs: Any) -> TaskStepOutput:
        return run_sync(self.arun_step(step, task, **kwargs))

    def stream_step(self, step: TaskStep, task: Task, **kwargs: Any) -> TaskStepOutput:
        return run_sync(self.astream_step(step, task, **kwargs))

    def finalize_task(self, task: Task, **kwargs: Any) -> None:
        """Called once the last step ran, before the agent's memory takes over the task's."""

    def announcements(self, task: Task, output: TaskStepOutput) -> list[AgentEvent]:
        """Events the runner emits once ``output`` is recorded and saved (after StepCompleted).

        For what a person may act on (a question to answer): announced only when the task is
        stored as waiting for it, so whatever they do next (save, restart, answer) starts there.
        """
        return []

    def carry_over(self, previous: Task) -> dict[str, Any]:
        """``extra_state`` a new task of the same conversation starts from, given the last finished task."""
        return {}

    def get_tools(self) -> list[BaseTool]:
        """The tools this worker may call (the runner validates edited tool arguments against them)."""
        return []

    def argument_is_deferred(self, value: Any) -> bool:
        """Whether an argument stands for a result not known yet (an LLMCompiler ``"$1"``, a CoA ``"y1"``):
        such an argument is checked against the schema when the call runs, not when a person edits it."""
        return False

    def validate_tool_kwargs(
        self, tool_name: str, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """Check a person's edit of a pending call's arguments; raise ToolArgumentsError if they don't fit."""
        tool = next((t for t in self.get_tools() if t.metadata.name == tool_name), None)
        if tool is None:
            raise ToolArgumentsError(f"there is no tool named {tool_name!r}")
        deferred = {
            name for name, value in kwargs.items() if self.argument_is_deferred(value)
        }
        problems = [
            (field, message)
            for field, message in tool.problems(kwargs)
            if field.split(".")[0] not in deferred
        ]
        if problems:
            raise schema_error(tool_name, problems)
        return dict(kwargs)

    def as_agent(self, **kwargs: Any) -> AgentRunner:
        from ..runner import AgentRunner

        return AgentRunner(self, **kwargs)
