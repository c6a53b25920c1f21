"""BaseAgentWorker: the step-wise agent algorithm the runner drives."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel

from .._sync import run_sync
from ..errors import ToolArgumentsError
from ..events import AgentEvent, AgentStream
from ..tools import BaseTool, ToolRetriever, schema_error
from ..types import Task, TaskStep, TaskStepOutput

if TYPE_CHECKING:
    from ..llms.base import LLM
    from ..runner import AgentRunner


def default_llm() -> LLM:
    """The model a worker built without one uses: ``OpenAI()`` (the seed's default)."""
    from ..llms.openai import OpenAI

    return OpenAI()


def constructor_parameters(cls: type) -> set[str] | None:
    """The keyword arguments ``cls(...)`` takes; None when it takes any."""
    parameters = inspect.signature(cls).parameters.values()
    names = {
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
    }
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        if not issubclass(cls, BaseModel):
            return None
        # a pydantic worker's extra keyword arguments are its fields (others would be ignored)
        names |= set(cls.model_fields)
    return names


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

    @classmethod
    def from_tools(
        cls,
        tools: Sequence[BaseTool] | None = None,
        tool_retriever: ToolRetriever | None = None,
        llm: LLM | None = None,
        callback_manager: Any = None,
        verbose: bool = False,
        **kwargs: Any,
    ) -> Self:
        """Build the worker from tools (or a tool retriever) and an LLM (``OpenAI()`` when none).

        Other keyword arguments are the constructor's; one it does not take is a TypeError
        naming it (LlamaIndex drops them silently). A worker fills its own defaults in
        ``from_tools_arguments``.
        """
        accepted = constructor_parameters(cls)
        common = {
            "tools": (list(tools or []), tools is not None),
            "tool_retriever": (tool_retriever, tool_retriever is not None),
            "llm": (llm, llm is not None),
            "callback_manager": (callback_manager, callback_manager is not None),
            "verbose": (verbose, verbose),
        }
        arguments = {
            name: value
            for name, (value, given) in common.items()
            if given or accepted is None or name in accepted
        }
        arguments = cls.from_tools_arguments({**arguments, **kwargs})
        unknown = sorted(set(arguments) - accepted) if accepted is not None else []
        if unknown:
            raise TypeError(
                f"{cls.__name__}.from_tools() got unexpected keyword arguments: {', '.join(unknown)}"
            )
        return cls(**arguments)

    @classmethod
    def from_tools_arguments(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        """The constructor's arguments for ``from_tools``: here, the default LLM where it takes one."""
        if "llm" in arguments and arguments["llm"] is None:
            arguments["llm"] = default_llm()
        return arguments

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
        """Run one step for a caller that streams (``stream_step``, ``stream_chat``); here, ``arun_step``.

        An override may return a StreamingAgentChatResponse it feeds: the runner reads it to its
        end, sending each delta as an AgentStream event, and records the plain response.
        """
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

    def get_tools(self, input: str = "") -> list[BaseTool]:
        """The tools this worker may call for ``input`` (the runner validates edited tool arguments
        against ``get_tools()``)."""
        return []

    def validate_tool_kwargs(
        self, tool_name: str, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """Check a person's edit of a pending call's arguments; raise ToolArgumentsError if they don't fit."""
        tool = next((t for t in self.get_tools() if t.metadata.name == tool_name), None)
        if tool is None:
            raise ToolArgumentsError(f"there is no tool named {tool_name!r}")
        problems = list(tool.problems(kwargs))
        if problems:
            raise schema_error(tool_name, problems)
        return dict(kwargs)

    def as_agent(self, **kwargs: Any) -> AgentRunner:
        from ..runner import AgentRunner

        return AgentRunner(self, **kwargs)
