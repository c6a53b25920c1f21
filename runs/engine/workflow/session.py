"""RunSession: the runner behind a caller's Context, and the loop that drives a run to its answer."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import WorkflowConfigError
from ..events import AgentEvent, AgentOutput, HumanResponseEvent, StepStarted
from ..memory import ChatMemoryBuffer
from ..messages import ChatMessage
from ..runner import AgentRunner
from ..state import InMemoryStateStore, TaskState
from ..types import StepKind, StepStatus, TaskStep, TaskStepOutput, ToolCallDecision
from .history import close_open_tool_calls
from .run_state import KEY, WorkflowRunState, question_waiters

if TYPE_CHECKING:
    from .workflow import AgentWorkflow

FORMAT_VERSION = 1


class _SessionStore(InMemoryStateStore):
    """The in-memory store, also read and written without awaiting (to save and restore a context)."""

    def peek(self, task_id: str) -> TaskState:
        return self._tasks[task_id]

    def restore(self, memory: list[ChatMessage], task: TaskState | None) -> None:
        self._memory = list(memory)
        if task is not None:
            self._tasks[task.task.task_id] = task

    def memory_now(self) -> list[ChatMessage]:
        return list(self._memory)


@dataclass
class _BeforeStep:
    """The task just before its running step: what a stopped step is rolled back to."""

    step_id: str
    memory_length: int
    extra_state: dict[str, Any]
    queue: list[TaskStep]


class RunSession:
    """One conversation with a workflow: its runner (memory, the unfinished task) and its inbox."""

    def __init__(self, workflow: AgentWorkflow) -> None:
        self.workflow = workflow
        self.store = _SessionStore()
        self.runner = AgentRunner(
            workflow.worker,
            verbose=workflow.verbose,
            state_store=self.store,
            on_event=self._on_event,
        )
        self.carry = workflow.fresh_run_state()
        self.task_id: str | None = None
        self.inbox: list[HumanResponseEvent] = []
        # questions of this conversation's finished runs that were answered (taken once)
        self.answered: set[str] = set()
        self.listeners: list[Callable[[AgentEvent], None]] = []
        self._changed: asyncio.Event | None = None
        self._before: _BeforeStep | None = None
        self._last_output: AgentOutput | None = None

    # --- events ----------------------------------------------------------------------------------

    def _on_event(self, event: AgentEvent) -> None:
        if isinstance(event, StepStarted) and self.task_id is not None:
            state = self.store.peek(self.task_id)
            self._before = _BeforeStep(
                step_id=event.step_id or "",
                memory_length=len(state.task.memory),
                extra_state=copy.deepcopy(state.task.extra_state),
                queue=[s.model_copy(deep=True) for s in state.step_queue],
            )
        elif isinstance(event, AgentOutput):
            self._last_output = event
        self.publish(event)

    def publish(self, event: AgentEvent) -> None:
        for listener in list(self.listeners):
            listener(event)

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _wait_for_change(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()
        self._changed.clear()

    # --- the shared state outside a step ---------------------------------------------------------

    def _state(self) -> TaskState | None:
        return self.store.peek(self.task_id) if self.task_id is not None else None

    def run_state(self) -> WorkflowRunState:
        state = self._state()
        return WorkflowRunState.of(state.task) if state is not None else self.carry

    def shared(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The shared state and the tools' values between steps, as kept (edits in place stay)."""
        state = self._state()
        if state is None:
            return self.carry.state, self.carry.store
        kept = state.task.extra_state[KEY]
        return kept.setdefault("state", {}), kept.setdefault("store", {})

    def set_shared(self, key: str, value: Any) -> None:
        """Keep ``value`` itself under ``key`` between steps (``"state"``: the shared state)."""
        state = self._state()
        if state is None:
            if key == "state":
                self.carry.state = value
            else:
                self.carry.store[key] = value
        elif key == "state":
            state.task.extra_state[KEY]["state"] = value
        else:
            self.shared()[1][key] = value

    # --- answers and approvals -------------------------------------------------------------------

    def deliver(self, event: HumanResponseEvent) -> None:
        self.inbox.append(self._bound(event))
        self._signal()

    def _open_waiters(self) -> list[str]:
        """The questions the run waits on now (none while a step runs)."""
        state = self._state()
        head = state.step_queue[0] if state is not None and state.step_queue else None
        if head is None or head.kind is not StepKind.HUMAN_INPUT or head.input:
            return []
        return question_waiters(head)

    def _answered_waiters(self) -> set[str]:
        answered = set(self.answered)
        state = self._state()
        for done in state.completed_steps if state is not None else []:
            if done.task_step.kind is StepKind.HUMAN_INPUT:
                answered.update(question_waiters(done.task_step))
        return answered | {e.waiter_id for e in self.inbox if e.waiter_id}

    def _bound(self, event: HumanResponseEvent) -> HumanResponseEvent:
        """``event`` bound to the question it answers, or WorkflowConfigError saying why it cannot be."""
        waiting = self._open_waiters()
        questions = self.run_state().questions
        wid = event.waiter_id
        if wid is None and event.tool_id is not None:
            wid = next(
                (
                    w
                    for w in waiting
                    if questions.get(w, None) and questions[w].tool_id == event.tool_id
                ),
                None,
            )
            if wid is None:
                raise WorkflowConfigError(
                    f"no question asked by tool call {event.tool_id!r} is waiting for an answer"
                )
            event = event.model_copy(update={"waiter_id": wid})
        if wid is None:
            return event  # the oldest open question's, or the next one asked
        if wid in self._answered_waiters():
            raise WorkflowConfigError(
                f"question {wid!r} was already answered; an answer is taken once"
            )
        if waiting and wid not in waiting:
            raise WorkflowConfigError(
                f"no question {wid!r} is waiting for an answer "
                f"(waiting: {', '.join(map(repr, waiting))})"
            )
        asked = questions.get(wid)
        if (
            event.tool_id is not None
            and asked is not None
            and asked.tool_id != event.tool_id
        ):
            raise WorkflowConfigError(
                f"question {wid!r} was asked by tool call {asked.tool_id!r}, not {event.tool_id!r}"
            )
        return event

    def _take_answers(self, step: TaskStep) -> str | None:
        """The step's input made of inbox answers, once every question of the step has one."""
        waiters: list[str] = list(step.step_state.get("questions", []))
        answers: dict[str, str] = {}
        picked: list[HumanResponseEvent] = []
        for event in self.inbox:
            if event.waiter_id in waiters and event.waiter_id not in answers:
                answers[event.waiter_id] = event.response
                picked.append(event)
        for event in self.inbox:
            free = [w for w in waiters if w not in answers]
            if event.waiter_id is None and free:
                answers[free[0]] = event.response
                picked.append(event)
        if len(answers) < len(waiters):
            return None
        self.inbox = [e for e in self.inbox if all(e is not p for p in picked)]
        if len(waiters) == 1:
            return answers[waiters[0]]
        return json.dumps(answers)

    async def decide(
        self,
        tool_id: str,
        approve: bool,
        tool_kwargs: dict[str, Any] | None = None,
        reason: str = "",
    ) -> None:
        state = self._state()
        step = state.step_queue[0] if state is not None and state.step_queue else None
        if state is None or step is None or step.kind is not StepKind.TOOL_CALLS:
            raise WorkflowConfigError("no tool call is waiting for approval")
        if approve:
            await self.runner.aapprove_tool_call(
                state.task.task_id, step.step_id, tool_id, tool_kwargs
            )
        else:
            await self.runner.areject_tool_call(
                state.task.task_id, step.step_id, tool_id, reason
            )
        self._signal()

    # --- driving a run ---------------------------------------------------------------------------

    async def start(
        self,
        user_msg: str | ChatMessage | None,
        chat_history: list[ChatMessage] | None,
        memory: ChatMemoryBuffer | None,
        approve_tool_calls: bool,
    ) -> None:
        """Create the run's task, or keep the unfinished one when there is nothing new to say."""
        if user_msg is not None and chat_history is not None:
            raise WorkflowConfigError("Cannot provide both user_msg and chat_history")
        if user_msg is None and chat_history is None:
            if self.task_id is None:
                raise WorkflowConfigError(
                    "nothing to run: pass user_msg or chat_history (the context has no unfinished run to resume)"
                )
            return
        await self._close_unfinished()
        if memory is not None:
            await self.store.save_memory(close_open_tool_calls(memory.get_all()))
        if chat_history is not None:
            await self.store.save_memory(close_open_tool_calls(chat_history))
        text = user_msg.text if isinstance(user_msg, ChatMessage) else (user_msg or "")
        task = await self.runner.acreate_task(
            text,
            approve_tool_calls=approve_tool_calls,
            extra_state={KEY: self.carry.model_dump(mode="json")},
        )
        self.task_id = task.task_id

    async def _close_unfinished(self) -> None:
        """A new message while a run is unfinished: keep what it said, with its open calls answered."""
        state = self._state()
        if state is None:
            return
        self.carry = WorkflowRunState.of(state.task).carried()
        said = state.task.memory.get_all()
        head = state.step_queue[0] if state.step_queue else None
        if head is not None and head.kind is StepKind.LLM and head.input:
            said.append(
                ChatMessage.user(head.input)
            )  # a message the run had not yet sent on
        await self.store.save_memory(close_open_tool_calls(said))
        await self.runner.adelete_task(state.task.task_id)
        self.task_id = None

    async def drive(self) -> AgentOutput:
        """Run steps until the answer, waiting for the person's answers and approvals when a step needs them."""
        assert self.task_id is not None
        task_id = self.task_id
        while True:
            state = self.store.peek(task_id)
            step = state.step_queue[0]
            output = await self._run_one(task_id, step)
            if output.is_last:
                return await self._finish(task_id, output)

    async def _run_one(self, task_id: str, step: TaskStep) -> TaskStepOutput:
        if step.kind is StepKind.HUMAN_INPUT and not step.input:
            while (answer := self._take_answers(step)) is None:
                await self._wait_for_change()
            return await self.runner.arun_step(task_id, input=answer)
        if step.kind is StepKind.TOOL_CALLS:
            while any(
                c.decision is ToolCallDecision.PENDING for c in step.tool_calls or []
            ):
                await self._wait_for_change()
        return await self.runner.arun_step(task_id)

    async def _finish(self, task_id: str, output: TaskStepOutput) -> AgentOutput:
        state = self.store.peek(task_id)
        run = WorkflowRunState.of(state.task)
        await self.runner.afinalize_response(task_id)
        self.answered = self._answered_waiters()
        self.carry = run.carried()
        self.task_id = None
        self._before = None
        last = self._last_output
        calls = (
            list(last.tool_calls)
            if last is not None and last.task_id == task_id
            else []
        )
        return AgentOutput(
            task_id=task_id,
            response=ChatMessage.assistant(output.output.response),
            tool_calls=calls,
            current_agent_name=run.current_agent,
        )

    def settle(self) -> None:
        """After a stopped run: put a step that was running back to not-yet-run."""
        state = self._state()
        before = self._before
        if (
            state is None
            or before is None
            or state.step_status.get(before.step_id) is not StepStatus.RUNNING
        ):
            return
        state.task.memory.truncate(before.memory_length)
        state.task.extra_state = before.extra_state
        state.step_queue = before.queue
        state.step_status.pop(before.step_id, None)
        self._before = None

    # --- saving ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        state = self._state()
        task: dict[str, Any] | None = None
        if state is not None:
            task = state.model_dump(mode="json")
            before = self._before
            if (
                before is not None
                and state.step_status.get(before.step_id) is StepStatus.RUNNING
            ):
                task["task"]["memory"]["messages"] = task["task"]["memory"]["messages"][
                    : before.memory_length
                ]
                task["task"]["extra_state"] = copy.deepcopy(before.extra_state)
                task["step_queue"] = [s.model_dump(mode="json") for s in before.queue]
                task["step_status"].pop(before.step_id, None)
        return {
            "version": FORMAT_VERSION,
            "agents": sorted(self.workflow.agents),
            "memory": [m.model_dump(mode="json") for m in self.store.memory_now()],
            "carry": self.carry.model_dump(mode="json"),
            "task": task,
            "inbox": [e.model_dump(mode="json") for e in self.inbox],
            "answered": sorted(self.answered),
        }

    def load_dict(self, data: dict[str, Any]) -> None:
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise WorkflowConfigError(
                f"not a saved workflow context (expected version {FORMAT_VERSION})"
            )
        try:
            memory = [ChatMessage.model_validate(m) for m in data["memory"]]
            carry = WorkflowRunState.model_validate(data["carry"])
            task = TaskState.model_validate(data["task"]) if data.get("task") else None
            inbox = [
                HumanResponseEvent.model_validate(e) for e in data.get("inbox", [])
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise WorkflowConfigError(f"the saved context is damaged: {exc}") from None
        agents = {carry.current_agent}
        if task is not None:
            agents.add(WorkflowRunState.of(task.task).current_agent)
        unknown = sorted(agents - set(self.workflow.agents))
        if unknown:
            raise WorkflowConfigError(
                f"the saved context names agent(s) {', '.join(map(repr, unknown))} this workflow does not have"
            )
        self.store.restore(memory, task)
        self.carry = carry
        self.inbox = inbox
        self.answered = {str(w) for w in data.get("answered", [])}
        self.task_id = task.task.task_id if task is not None else None
