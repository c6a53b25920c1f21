"""One step's run, for both runners: what the worker works on, how its end is recorded, and how
a failure is taken back.

``InPlace`` (``AgentRunner``): the step works on the task itself while the runner holds the
task's lock; its checkpoint is the whole task before it, and a failure restores that.
``Branch`` (``ParallelAgentRunner``): the step works on a copy of the task, is claimed and
recorded under the lock and runs outside it, so ready steps run side by side; its checkpoint is
what it changed, and a failure leaves the task as it is. ``execute`` runs either.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NoReturn

from .errors import StepFailedError
from .events import AgentStream, StepCompleted, StepFailed, StepInterrupted, StepStarted
from .state import Checkpoint, TaskState
from .stopped_note import carry_over
from .streaming import StreamingAgentChatResponse
from .types import (
    AgentChatResponse,
    StepStatus,
    Task,
    TaskStep,
    TaskStepOutput,
    ToolCallDecision,
)

if TYPE_CHECKING:
    from .runner_core import RunnerCore

logger = logging.getLogger(__name__)


def approve_pending(step: TaskStep) -> None:
    """Running a step approves the calls a person left undecided."""
    for call in step.tool_calls or []:
        if call.decision is ToolCallDecision.PENDING:
            call.decision = ToolCallDecision.APPROVED


def record(
    state: TaskState, step: TaskStep, output: TaskStepOutput, checkpoint: Checkpoint
) -> None:
    """Put a finished step's output into the task's state."""
    state.step_queue = [s for s in state.step_queue if s.step_id != step.step_id]
    state.step_queue.extend(output.next_steps)
    state.completed_steps.append(output)
    state.checkpoints.append(checkpoint)
    state.step_status.pop(step.step_id, None)


class StepRun(ABC):
    """One run of ``step`` of ``state`` by ``runner``'s worker."""

    def __init__(self, runner: RunnerCore, state: TaskState, step: TaskStep) -> None:
        self.runner = runner
        self.state = state
        self.step = step
        self.claimed = False

    @property
    def task_id(self) -> str:
        return self.state.task.task_id

    @property
    @abstractmethod
    def work(self) -> Task:
        """The task the worker runs the step on."""

    @property
    @abstractmethod
    def running(self) -> TaskStep:
        """The step object the worker runs (and the output records)."""

    @abstractmethod
    async def claim(self) -> None:
        """Mark the step running and store that."""

    @abstractmethod
    async def finish(self, output: TaskStepOutput) -> TaskState:
        """Record ``output`` into the task and store it; the task's state as recorded."""

    @abstractmethod
    def roll_back(self, status: StepStatus | None) -> None:
        """Take the step's changes back out of the task in memory; give it ``status`` (None: pending)."""

    @abstractmethod
    async def store_end(self, status: StepStatus | None) -> None:
        """Store the task as ``roll_back`` left it."""


class InPlace(StepRun):
    """The step runs on the task itself; the caller holds the task's lock throughout."""

    def __init__(self, runner: RunnerCore, state: TaskState, step: TaskStep) -> None:
        super().__init__(runner, state, step)
        live = state.task
        queue = [s.model_copy(deep=True) for s in state.step_queue]
        self.checkpoint = Checkpoint(
            step=next(s for s in queue if s.step_id == step.step_id),
            queue=queue,
            memory_length=len(live.memory),
            extra_state=copy.deepcopy(live.extra_state),
        )
        self.done_before = len(state.completed_steps)

    @property
    def work(self) -> Task:
        return self.state.task

    @property
    def running(self) -> TaskStep:
        return self.step

    async def claim(self) -> None:
        # after the checkpoint: undo gives the person back the calls they left undecided
        approve_pending(self.step)
        self.state.step_status[self.step.step_id] = StepStatus.RUNNING
        await self.runner.state_store.save_task(self.state)
        self.claimed = True

    async def finish(self, output: TaskStepOutput) -> TaskState:
        record(self.state, self.step, output, self.checkpoint)
        await self.runner.state_store.save_task(self.state)
        return self.state

    def roll_back(self, status: StepStatus | None) -> None:
        state, checkpoint = self.state, self.checkpoint
        state.task.memory.truncate(checkpoint.memory_length)
        if (
            status is StepStatus.INTERRUPTED
        ):  # stopped: what its calls began is owed a note
            carry_over(state.task.extra_state, checkpoint.extra_state)
        state.task.extra_state = checkpoint.extra_state
        del state.completed_steps[self.done_before :]
        del state.checkpoints[self.done_before :]
        state.restore_queue(checkpoint.queue)
        if status is None:
            state.step_status.pop(self.step.step_id, None)
        else:
            state.step_status[self.step.step_id] = status

    async def store_end(self, status: StepStatus | None) -> None:
        await self.runner.state_store.save_task(self.state)


class Branch(StepRun):
    """The step runs on a copy of the task, beside others; only claiming and recording hold the lock."""

    def __init__(self, runner: RunnerCore, state: TaskState, step: TaskStep) -> None:
        super().__init__(runner, state, step)
        # before the copy: undo queues the branch again as it was approved
        approve_pending(step)
        self.before = step.model_copy(deep=True)
        self._work = _task_copy(state.task)
        runner._attach(self._work)
        self._running = step.model_copy(deep=True)
        self.base_state = copy.deepcopy(self._work.extra_state)
        self.base_length = len(self._work.memory)

    @property
    def work(self) -> Task:
        return self._work

    @property
    def running(self) -> TaskStep:
        return self._running

    async def claim(self) -> None:
        """Called under the task's lock."""
        self.state.step_status[self.step.step_id] = StepStatus.RUNNING
        try:
            await self.runner.state_store.save_task(self.state)
        except BaseException:
            self.state.step_status.pop(self.step.step_id, None)
            raise
        self.claimed = True

    async def finish(self, output: TaskStepOutput) -> TaskState:
        work, base_state = self._work, self.base_state
        checkpoint = Checkpoint(
            step=self.before,
            queue=[],
            memory_length=self.base_length,
            extra_state={},
            branch=True,
            added_messages=work.memory.get_all()[self.base_length :],
        )
        changed = {
            key: value
            for key, value in work.extra_state.items()
            if key not in base_state or base_state[key] != value
        }
        removed = [key for key in base_state if key not in work.extra_state]
        checkpoint.state_before = {
            key: base_state[key] for key in [*changed, *removed] if key in base_state
        }
        checkpoint.state_added = [key for key in changed if key not in base_state]
        async with self.runner._lock(self.task_id):
            state = await self.runner._load(self.task_id)
            live = state.task
            live.memory.put_messages(checkpoint.added_messages)
            live.extra_state.update(changed)
            for key in removed:
                live.extra_state.pop(key, None)
            record(state, self._running, output, checkpoint)
            await self.runner.state_store.save_task(state)
        return state

    def roll_back(self, status: StepStatus | None) -> None:
        """Nothing to take back: the step ran on a copy (its status is stored by ``store_end``)."""

    async def store_end(self, status: StepStatus | None) -> None:
        step_id = self.step.step_id
        async with self.runner._lock(self.task_id):
            state = await self.runner._load(self.task_id)
            if any(s.step_id == step_id for s in state.step_queue):
                if status is StepStatus.INTERRUPTED:
                    carry_over(self._work.extra_state, state.task.extra_state)
                if status is None:
                    state.step_status.pop(step_id, None)
                else:
                    state.step_status[step_id] = status
                await self.runner.state_store.save_task(state)


def _task_copy(task: Task) -> Task:
    """An independent copy of ``task`` for one step to work on."""
    return Task(
        task_id=task.task_id,
        input=task.input,
        memory=task.memory.copy_buffer(),
        extra_state=copy.deepcopy(task.extra_state),
        approve_tool_calls=task.approve_tool_calls,
        history_length=task.history_length,
    )


async def _drained(
    run: StepRun, step: TaskStep, stream: StreamingAgentChatResponse
) -> AgentChatResponse:
    """The response of a stream a worker's ``astream_step`` returned, once it ended; each of its
    deltas is sent on as an AgentStream, as the engine's own workers send theirs."""
    text = ""
    async for delta in stream.async_response_gen():
        text += delta
        await run.runner._emit(
            AgentStream(
                task_id=run.task_id, step_id=step.step_id, delta=delta, response=text
            )
        )
    return await stream.aget_response()


async def execute(
    run: StepRun, worker_kwargs: dict[str, Any], stream: bool = False
) -> TaskStepOutput:
    """Run the step, record its output, and announce it; on any error or cancellation take it back.

    ``stream``: the caller streams, so the worker's ``astream_step`` runs the step (its
    ``arun_step`` otherwise). A StreamingAgentChatResponse it returns is read to its end here:
    its deltas are sent as events and the step records the plain response.
    """
    runner, task_id, step = run.runner, run.task_id, run.running
    worker = runner.agent_worker
    started = False
    try:
        if not run.claimed:
            await run.claim()
        await runner._emit(
            StepStarted(task_id=task_id, step_id=step.step_id, input=step.input)
        )
        started = True
        if stream:
            output = await worker.astream_step(step, run.work, **worker_kwargs)
        else:
            output = await worker.arun_step(step, run.work, **worker_kwargs)
        if isinstance(output.output, StreamingAgentChatResponse):
            output.output = await _drained(run, step, output.output)
        for next_step in output.next_steps:
            step.link_step(next_step)
        output.task_step = step
        state = await run.finish(output)
    except BaseException as exc:
        await _failed(run, exc, started)
    await runner._emit(
        StepCompleted(
            task_id=task_id,
            step_id=step.step_id,
            output=output.output.response,
            is_last=output.is_last,
            next_steps=[s.step_id for s in output.next_steps],
            usage=output.output.usage,
        )
    )
    await runner._emit_following(state.task, output)
    return output


def _log_unstored_end(reporting: asyncio.Future[None]) -> None:
    if not reporting.cancelled() and reporting.exception() is not None:
        logger.warning(
            "the end of a stopped step was not stored: %r", reporting.exception()
        )


async def _failed(run: StepRun, exc: BaseException, started: bool) -> NoReturn:
    """Put the task back as before the step, keep the step queued, and report why.

    Runs for an error and for a cancellation alike, at any point of the step; a cancellation is
    re-raised as it is (the step is pending again), an error as StepFailedError (the step is
    marked failed). A step cancelled before it was announced as started goes back to pending
    without an event.
    """
    interrupted = not isinstance(exc, Exception)
    message = str(exc) or type(exc).__name__
    step_id = run.step.step_id
    status: StepStatus | None
    ended: StepFailed | StepInterrupted | None
    if interrupted and not started:
        status, ended = None, None  # never began: pending, as before
    elif interrupted:
        # it began and was cut off: not a failure, and not silently pending either
        status = StepStatus.INTERRUPTED
        ended = StepInterrupted(task_id=run.task_id, step_id=step_id)
    else:
        status = StepStatus.FAILED
        ended = StepFailed(
            task_id=run.task_id,
            step_id=step_id,
            error=message,
            error_type=type(exc).__name__,
        )
    run.roll_back(status)

    async def report() -> None:
        await run.store_end(status)
        if ended is not None:
            await run.runner._emit(ended)

    # a cancelled step still stores its rollback: shielded, so a second cancel cannot cut it short
    if interrupted:
        reporting = asyncio.ensure_future(report())
        try:
            await asyncio.shield(reporting)
        except asyncio.CancelledError:
            # cancelled again meanwhile: nobody awaits it, so its failure is logged, not lost
            reporting.add_done_callback(_log_unstored_end)
            raise
    else:
        await report()
    if interrupted:
        raise exc
    raise StepFailedError(f"step failed: {message}") from exc
