"""Running a task: its steps, its final response, and whole conversations (chat)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import (
    TaskFinishedError,
    TaskNotDoneError,
    UnknownStepError,
)
from .events import (
    AgentEvent,
    AgentStream,
    TaskCompleted,
)
from .llms.base import ToolChoice
from .messages import ChatMessage
from .runner_core import TaskRef, _own_messages, _task_id, _total_usage
from .runner_steering import RunnerSteering
from .state import TaskState, TaskStatus
from .step_run import Branch, InPlace, StepRun, execute
from .streaming import StreamingAgentChatResponse
from .tools import ToolOutput
from .types import (
    AgentChatResponse,
    ChatResponseMode,
    Task,
    TaskStep,
    TaskStepOutput,
)

if TYPE_CHECKING:
    pass


class RunnerSteps(RunnerSteering):
    """Running steps (one routine for both runners, in step_run.py), finishing tasks, whole chats."""

    def _pick_step(self, state: TaskState, step_id: str | None) -> TaskStep:
        task_id = state.task.task_id
        if state.status is not TaskStatus.ACTIVE or state.is_done:
            raise TaskFinishedError(
                f"task {task_id!r} is finished ({state.status.value}); it has no step to run"
            )
        if not state.step_queue:
            raise TaskFinishedError(f"task {task_id!r} has no upcoming step")
        if step_id is None:
            return state.step_queue[0]
        for step in state.step_queue:
            if step.step_id == step_id:
                return step
        raise UnknownStepError(task_id, step_id)

    def _step_run(self, state: TaskState, step: TaskStep) -> StepRun:
        return (
            Branch(self, state, step)
            if self.runs_branches
            else InPlace(self, state, step)
        )

    def runnable_steps(self, state: TaskState) -> list[TaskStep]:
        """The steps that may run next: the queue's head (one step at a time)."""
        return state.step_queue[:1]

    async def _arun_step(
        self,
        task: TaskRef,
        step_id: str | None,
        input: str | None,
        on_pick: Callable[[TaskStep], None] | None = None,
        stream: bool = False,
        **worker_kwargs: Any,
    ) -> TaskStepOutput:
        task_id = _task_id(task)
        async with self._lock(task_id):
            state = await self._load(task_id)
            step = self._pick_step(state, step_id)
            if on_pick is not None:
                on_pick(step)
            if input is not None:
                self._set_input(state, step, input)
            run = self._step_run(state, step)
            if not self.runs_branches:
                # alone: under the lock throughout
                return await execute(run, worker_kwargs, stream)
            await run.claim()  # a branch is claimed under the lock and runs outside it
        return await execute(run, worker_kwargs, stream)

    async def arun_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        """Run the next step (or the given one); ``input`` replaces the step's input first.

        Other ``kwargs`` (e.g. ``tool_choice``) are passed to the worker's ``arun_step``.
        """
        step_id = step.step_id if isinstance(step, TaskStep) else step
        return await self._arun_step(task_id, step_id, input, **kwargs)

    async def astream_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        """Run a step whose ``output`` is a StreamingAgentChatResponse that streams as the model writes.

        Returns as soon as the worker says the step is writing its final answer
        (``BaseAgentWorker.streams_answer``): ``is_last`` is then True and the answer's tokens
        keep arriving on ``output.async_response_gen()``. Otherwise it returns when the step ends,
        its output a stream that is already complete. The worker's ``astream_step`` runs the
        step (the engine's workers: the same run as ``arun_step``), and it is recorded exactly as
        with ``arun_step``; ``finalize_response`` waits for it to end.
        """
        streaming = StreamingAgentChatResponse()
        early: asyncio.Future[TaskStep] = asyncio.get_running_loop().create_future()
        picked: list[TaskStep] = []
        worker = self.agent_worker
        task_key = _task_id(task_id)

        def listen(event: AgentEvent) -> None:
            if not picked or event.step_id != picked[0].step_id:
                return
            if isinstance(event, AgentStream) and event.delta and event.phase is None:
                if early.done() or worker.streams_answer(event):
                    streaming.put_delta(event.delta)
                    if not early.done():
                        early.set_result(picked[0])

        async def drive() -> TaskStepOutput:
            self._listen(task_key, listen)
            try:
                step_id = step.step_id if isinstance(step, TaskStep) else step
                output = await self._arun_step(
                    task_id,
                    step_id,
                    input,
                    on_pick=picked.append,
                    stream=True,
                    **kwargs,
                )
            except BaseException as exc:
                streaming.fail(exc)
                raise
            finally:
                self._unlisten(task_key, listen)
            if not streaming.deltas_sent and output.output.response:
                streaming.put_delta(output.output.response)
            streaming.finish(output.output)
            return output

        running = asyncio.ensure_future(drive())
        streaming.attach(running)
        try:
            waiting: list[asyncio.Future[Any]] = [running, early]
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            running.cancel()
            raise
        if early.done():
            return TaskStepOutput(
                output=streaming, task_step=early.result(), is_last=True
            )
        early.cancel()
        output = running.result()
        return TaskStepOutput(
            output=streaming,
            task_step=output.task_step,
            next_steps=output.next_steps,
            is_last=output.is_last,
        )

    async def afinalize_response(
        self, task_id: str, step_output: TaskStepOutput | None = None
    ) -> AgentChatResponse:
        """Finish a task whose last step ran: its conversation is added to the agent's memory.

        ``step_output.output`` (the last step's, as ``run_step`` or ``stream_step`` returned it)
        is the response returned, as in LlamaIndex the same object, given the task's sources and
        total usage; a streamed step's is its StreamingAgentChatResponse, once its step ended.
        The sources are ``task.extra_state["sources"]`` where a worker keeps them there (as
        LlamaIndex's workers do), else every step's. Without ``step_output``: a copy of the
        stored last step's response (the record keeps its own sources).
        """
        if step_output is not None and not step_output.is_last:
            raise TaskNotDoneError(
                "finalize_response takes the output of the task's last step (is_last)"
            )
        async with self._lock(task_id):
            state = await self._load(task_id)
            if not state.is_done:
                raise TaskNotDoneError(
                    f"task {task_id!r} is not done: its last step has not run yet"
                )
            if step_output is not None:
                response = step_output.output
            else:
                response = state.completed_steps[-1].output.model_copy(deep=True)
            if isinstance(response, StreamingAgentChatResponse):
                await response.aget_response()
            response.sources = _task_sources(state)
            response.usage = _total_usage(state.completed_steps)
            if state.status is TaskStatus.COMPLETED:
                return response
            self.agent_worker.finalize_task(state.task)
            agent_memory = await self._agent_memory()
            agent_memory.put_messages(_own_messages(state.task))
            await self.state_store.save_memory(agent_memory.get_all())
            state.status = TaskStatus.COMPLETED
            state.response = response.response
            await self.state_store.save_task(state)
        await self._emit(TaskCompleted(task_id=task_id, response=response.response))
        if self.delete_task_on_finish:
            await self.adelete_task(task_id)
        return response

    async def _arun_task(
        self,
        message: str,
        chat_history: list[ChatMessage] | None,
        tool_choice: ToolChoice | None,
        on_created: Callable[[Task], None] | None = None,
        mode: ChatResponseMode = ChatResponseMode.WAIT,
    ) -> AgentChatResponse:
        """Create a task for ``message``, run its steps to the end (each as ``mode`` says) and finalize it."""
        if chat_history is not None:
            self.memory.set(chat_history)
            await self.state_store.save_memory(self.memory.get_all())
            self._memory_synced = True
        task = await self.acreate_task(message, approve_tool_calls=False)
        if on_created is not None:
            on_created(task)
        choice: ToolChoice = (
            self.default_tool_choice if tool_choice is None else tool_choice
        )
        while not await self._advance(task.task_id, choice, mode):
            choice = "auto"  # forcing a tool beyond the first step would loop for ever
        return await self.afinalize_response(task.task_id)

    async def _advance(
        self, task_id: str, tool_choice: ToolChoice, mode: ChatResponseMode
    ) -> bool:
        """Run a chat's next step; whether it was the last."""
        output = await self._arun_step(
            task_id,
            None,
            None,
            stream=mode is ChatResponseMode.STREAM,
            tool_choice=tool_choice,
        )
        return output.is_last

    async def achat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> AgentChatResponse:
        """Run a task for ``message`` to the end and return the final response.

        ``tool_choice`` (default: the runner's ``default_tool_choice``) applies to the first step.
        """
        return await self._arun_task(message, chat_history, tool_choice)

    async def aquery(self, query: str) -> AgentChatResponse:
        return await self.achat(query)

    async def astream_chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> StreamingAgentChatResponse:
        """Start a task and return at once; its answer's text streams from ``async_response_gen()``."""
        streaming = StreamingAgentChatResponse()

        def listen(event: AgentEvent) -> None:
            # only answer text: a planner's or joiner's working (phase "plan"/"join") is not the reply
            if isinstance(event, AgentStream) and event.delta and event.phase is None:
                streaming.put_delta(event.delta)

        listening: list[str] = []

        def created(task: Task) -> None:
            listening.append(task.task_id)
            self._listen(task.task_id, listen)

        async def drive() -> None:
            try:
                response = await self._arun_task(
                    message,
                    chat_history,
                    tool_choice,
                    on_created=created,
                    mode=ChatResponseMode.STREAM,
                )
                if not streaming.deltas_sent:
                    streaming.put_delta(
                        response.response
                    )  # a worker that streams no answer text
                streaming.finish(response)
            except BaseException as exc:
                streaming.fail(exc)
                raise
            finally:
                for task_id in listening:
                    self._unlisten(task_id, listen)

        streaming.attach(asyncio.ensure_future(drive()))
        return streaming


def _task_sources(state: TaskState) -> list[ToolOutput]:
    """The task's sources: those its worker kept in ``extra_state["sources"]``, else every step's."""
    kept = state.task.extra_state.get("sources")
    if isinstance(kept, list):
        return [ToolOutput.model_validate(source) for source in kept]
    return [source for done in state.completed_steps for source in done.output.sources]
