"""AgentRunner: creates tasks, runs their steps one at a time, and lets a person steer and undo them.

The class is built in layers, one module each: ``runner_core`` (construction, events, tasks),
``runner_steering`` (input edits, tool-call decisions, undo), ``runner_steps`` (running steps,
finishing, chat), ``runner_sync`` (the sync twins); here, the factory ``from_llm``.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .llms.base import LLM
from .runner_sync import RunnerSync
from .tools import BaseTool

if TYPE_CHECKING:
    from .workers.base import BaseAgentWorker


class AgentRunner(RunnerSync):
    """Runs an AgentWorker's steps over tasks kept in a StateStore.

    The constructor takes LlamaIndex's parameters in its order (``state`` is the runner's
    StateStore; ``state_store`` is the same by its own name), plus ``on_event`` (the native way to
    hear every typed event) and ``approve_tool_calls``. Beyond LlamaIndex's runner: ``undo_step``
    rolls a task back one step exactly, ``update_step_input`` edits a step before it runs, and
    tool calls can wait for approval.
    """

    @staticmethod
    def from_llm(
        tools: list[BaseTool] | None = None, llm: LLM | None = None, **kwargs: Any
    ) -> AgentRunner:
        """A runner over the worker that fits ``llm``: function calling where the model supports it.

        ``kwargs`` that are the runner's parameters go to the runner (``verbose`` and
        ``callback_manager`` to both), the rest to the worker's ``from_tools``.
        """
        from .workers.function_calling import FunctionCallingAgentWorker

        if llm is None:
            from .llms.openai import OpenAI

            llm = OpenAI()
        runner_kwargs = {
            name: kwargs.pop(name)
            for name in list(kwargs)
            if name in _RUNNER_PARAMETERS
        }
        shared = {
            name: runner_kwargs[name]
            for name in ("verbose", "callback_manager")
            if name in runner_kwargs
        }
        if not llm.metadata.is_function_calling_model:
            from .workers.react import ReActAgentWorker

            worker: BaseAgentWorker = ReActAgentWorker.from_tools(
                tools, llm=llm, **shared, **kwargs
            )
        else:
            worker = FunctionCallingAgentWorker.from_tools(
                tools, llm=llm, **shared, **kwargs
            )
        return AgentRunner(worker, llm=llm, **runner_kwargs)


_RUNNER_PARAMETERS = frozenset(inspect.signature(AgentRunner.__init__).parameters) - {
    "self",
    "agent_worker",
}
