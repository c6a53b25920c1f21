"""FnAgentWorker: a worker from one plain function ``fn(state) -> (state, is_done)``.

The seed's replacement for the deprecated QueryPipelineAgentWorker. Each step calls the function
with the task's state dict; ``state["__task__"]`` is the Task during the call, and the step's
response is ``str(state["__output__"])``. The state is kept between steps as plain data, so undo
restores it exactly.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from ..types import AgentChatResponse, Task, TaskStep, TaskStepOutput
from .base import BaseAgentWorker

StateFn = Callable[[dict[str, Any]], tuple[dict[str, Any], bool]]
AsyncStateFn = Callable[[dict[str, Any]], Awaitable[tuple[dict[str, Any], bool]]]


class FnAgentWorker(BaseAgentWorker):
    """Runs ``fn`` (or ``async_fn`` on the async paths) once per step until it says it is done."""

    def __init__(
        self,
        fn: StateFn | AsyncStateFn | None = None,
        async_fn: AsyncStateFn | None = None,
        initial_state: dict[str, Any] | None = None,
        task_input_key: str = "__task__",
        output_key: str = "__output__",
        callback_manager: Any = None,
        verbose: bool = False,
    ) -> None:
        if fn is None and async_fn is None:
            raise ValueError("FnAgentWorker needs fn or async_fn")
        if async_fn is None and fn is not None and inspect.iscoroutinefunction(fn):
            fn, async_fn = None, fn
        self.fn = fn
        self.async_fn = async_fn
        self.initial_state = dict(initial_state or {})
        self.task_input_key = task_input_key
        self.output_key = output_key
        self.callback_manager = callback_manager
        self.verbose = verbose

    def initialize_step(self, task: Task, **kwargs: Any) -> TaskStep:
        return TaskStep(
            task_id=task.task_id, input=task.input, step_state=dict(self.initial_state)
        )

    async def _call(self, state: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        if self.async_fn is not None:
            return await self.async_fn(state)
        fn = self.fn
        assert fn is not None
        context = contextvars.copy_context()
        # a plain function may block (an LLM call, a query): keep it off the event loop
        result = await asyncio.get_running_loop().run_in_executor(
            None, lambda: context.run(fn, state)
        )
        return result  # type: ignore[return-value]

    async def arun_step(
        self, step: TaskStep, task: Task, **kwargs: Any
    ) -> TaskStepOutput:
        state = dict(step.step_state)
        state[self.task_input_key] = task
        result = await self._call(state)
        if not (
            isinstance(result, tuple)
            and len(result) == 2
            and isinstance(result[0], dict)
        ):
            raise TypeError(
                f"the state function must return (state: dict, is_done: bool), got {result!r}"
            )
        new_state, is_done = result
        new_state = {k: v for k, v in new_state.items() if k != self.task_input_key}
        response = AgentChatResponse(response=str(new_state.get(self.output_key, "")))
        step.step_state = new_state
        if self.verbose:
            print(f"> step done={bool(is_done)}: {response.response}")
        next_steps = (
            [] if is_done else [step.get_next_step(input=None, step_state=new_state)]
        )
        return TaskStepOutput(
            output=response,
            task_step=step,
            is_last=bool(is_done),
            next_steps=next_steps,
        )
