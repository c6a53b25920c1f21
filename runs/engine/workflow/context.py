"""Context: what a tool and the caller see of a workflow run (state, questions to the person, saving)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import WorkflowConfigError
from ..events import AgentEvent, HumanResponseEvent, InputRequiredEvent
from ..tools import ToolContext
from ..types import PendingToolCall, Task, TaskStep
from .run_state import OpenQuestion, WorkflowRunState

if TYPE_CHECKING:
    from .session import RunSession
    from .workflow import AgentWorkflow

_MISSING: Any = object()
_sending: set[asyncio.Task[None]] = set()


class WaitingForInput(BaseException):
    """Leaves a tool that waits for the person's answer; the step pauses (the tool re-runs on the answer).

    A BaseException so that a tool's own ``except Exception`` does not swallow it.
    """

    def __init__(self, waiter_id: str) -> None:
        super().__init__(waiter_id)
        self.waiter_id = waiter_id


@dataclass
class StepScope:
    """The step (and tool call) a tool's context belongs to."""

    task: Task
    step: TaskStep
    run: WorkflowRunState
    call: PendingToolCall | None = None
    waits: int = 0


def _check_json(key: str, value: Any) -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise WorkflowConfigError(
            f"ctx.set({key!r}, …): the value must be JSON data so the run can be saved ({exc})"
        ) from None


class Context(ToolContext):
    """A workflow run's context.

    A tool whose first parameter is annotated ``Context`` receives it: ``await ctx.get("state")``,
    ``await ctx.set("state", …)``, ``await ctx.wait_for_event(HumanResponseEvent, …)``. The caller
    gets it as ``handler.ctx``: ``send_event`` answers a question, ``to_dict`` / ``from_dict`` save
    and restore the whole conversation (memory, state, current agent, a paused run).
    """

    def __init__(self, workflow: AgentWorkflow) -> None:
        self._workflow = workflow
        self._scope: StepScope | None = None
        self._session_obj: RunSession | None = None

    # --- the session behind a caller's context ---------------------------------------------------

    @property
    def _session(self) -> RunSession:
        if self._session_obj is None:
            from .session import RunSession

            self._session_obj = RunSession(self._workflow)
        return self._session_obj

    @classmethod
    def for_step(
        cls, workflow: AgentWorkflow, task: Task, step: TaskStep, run: WorkflowRunState
    ) -> Context:
        """The context tools of ``step`` receive."""
        ctx = cls(workflow)
        ctx._scope = StepScope(task=task, step=step, run=run)
        return ctx

    def for_call(self, call: PendingToolCall) -> Context:
        """This step's context for one tool call (questions are told apart by call)."""
        assert self._scope is not None
        ctx = Context(self._workflow)
        scope = self._scope
        ctx._scope = StepScope(
            task=scope.task, step=scope.step, run=scope.run, call=call
        )
        return ctx

    def _run_state(self) -> WorkflowRunState:
        if self._scope is not None:
            return self._scope.run
        return self._session.run_state()

    # --- state -----------------------------------------------------------------------------------

    async def get(self, key: str, default: Any = _MISSING) -> Any:
        """``"state"`` is the shared state, ``"current_agent_name"`` the agent in charge; other keys are the tools' own.

        As in LlamaIndex, the value itself is returned, not a copy: an edit in place
        (``state = await ctx.get("state"); state["x"] = 1``) is kept without ``ctx.set``, and
        undone with its step. It must leave JSON data: a step that ends with anything else kept
        fails, naming the key.
        """
        if key == "current_agent_name":
            return self._run_state().current_agent
        state, store = self._values()
        if key == "state":
            return state
        if key in store:
            return store[key]
        if default is _MISSING:
            raise KeyError(f"the context has no value for {key!r}")
        return default

    async def set(self, key: str, value: Any) -> None:
        """Keep ``value`` (JSON data) itself under ``key``; ``"state"`` replaces the shared state."""
        if key == "current_agent_name":
            raise WorkflowConfigError(
                "the current agent changes only through a handoff"
            )
        if key == "state" and not isinstance(value, dict):
            raise WorkflowConfigError("the state must be a dict")
        _check_json(key, value)
        if self._scope is not None:
            run = self._scope.run
            if key == "state":
                run.state = value
            else:
                run.store[key] = value
        else:
            self._session.set_shared(key, value)

    def _values(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The shared state and the tools' values, as kept (not copies)."""
        if self._scope is not None:
            return self._scope.run.state, self._scope.run.store
        return self._session.shared()

    # --- questions to the person -----------------------------------------------------------------

    async def wait_for_event(
        self,
        event_type: type[HumanResponseEvent] = HumanResponseEvent,
        waiter_event: InputRequiredEvent | None = None,
        waiter_id: str | None = None,
        requirements: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> HumanResponseEvent:
        """Ask the person (``waiter_event``) and return their answer.

        The first time, the question is recorded and the run pauses: the tool stops here and runs
        again from its start once the answer is in, when this call returns it at once. Code before
        this call therefore runs twice. The question is announced (an InputRequiredEvent) once
        the step has paused and is stored so, never while it still runs: whatever the person
        does on seeing it (answer, save the context, restart) starts from the pause. ``requirements`` and ``timeout`` are accepted for
        compatibility; a run waits as long as it takes (save it with ``to_dict`` meanwhile).
        """
        if event_type is not HumanResponseEvent:
            raise WorkflowConfigError("a tool can wait only for a HumanResponseEvent")
        scope = self._scope
        if scope is None or scope.call is None:
            raise WorkflowConfigError(
                "wait_for_event can be called only from a tool during a run"
            )
        scope.waits += 1
        wid = waiter_id or f"{scope.call.tool_id}#{scope.waits}"
        run = scope.run
        if wid in run.answers:
            return HumanResponseEvent(
                task_id=scope.task.task_id,
                step_id=scope.step.step_id,
                response=run.answers[wid],
                waiter_id=wid,
            )
        if wid not in run.questions:  # one open question per waiter id
            asked = waiter_event or InputRequiredEvent()
            run.questions[wid] = OpenQuestion(
                waiter_id=wid,
                prefix=asked.prefix,
                tool_id=scope.call.tool_id,
                tool_name=scope.call.tool_name,
                agent=run.current_agent,
                step_id=scope.step.step_id,
            )
        raise WaitingForInput(wid)

    def send_event(self, event: HumanResponseEvent) -> None:
        """Answer a question (the oldest open one unless ``event.waiter_id`` names one).

        An answer sent before the question is asked is kept and given to the next question.
        One naming a question that is not waiting (answered already, or not the one asked; or
        a ``tool_id`` other than the asking call's) is refused with WorkflowConfigError.
        """
        if not isinstance(event, HumanResponseEvent):
            raise WorkflowConfigError("only a HumanResponseEvent can be sent to a run")
        self._session.deliver(event)

    def write_event_to_stream(self, event: AgentEvent) -> None:
        """Put one of the engine's events into the run's stream (tools may report progress this way)."""
        if self._scope is None:
            self._session.publish(event)
            return
        task = self._scope.task
        ids = {"task_id": task.task_id, "step_id": self._scope.step.step_id}
        sending = asyncio.get_running_loop().create_task(
            task.emit(event.model_copy(update=ids))
        )
        _sending.add(sending)  # asyncio keeps only a weak reference to a task
        sending.add_done_callback(_sending.discard)

    # --- tool approval from code -----------------------------------------------------------------

    async def approve_tool_call(
        self, tool_id: str, tool_kwargs: dict[str, Any] | None = None
    ) -> None:
        """Approve a call waiting for approval (``run(..., approve_tool_calls=True)``), optionally edited."""
        await self._session.decide(tool_id, approve=True, tool_kwargs=tool_kwargs)

    async def reject_tool_call(self, tool_id: str, reason: str) -> None:
        await self._session.decide(tool_id, approve=False, reason=reason)

    # --- saving ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The conversation as JSON data: memory, state, current agent and any unfinished run.

        Taken at a step boundary: a step running right now is saved as not yet run.
        """
        return self._session.to_dict()

    @classmethod
    def from_dict(cls, workflow: AgentWorkflow, data: dict[str, Any]) -> Context:
        """A context restored from ``to_dict()``'s data, for ``workflow.run(ctx=…)``."""
        ctx = cls(workflow)
        ctx._session.load_dict(data)
        return ctx
