"""The sync façade: the non-async twins of the runner's methods."""

from __future__ import annotations

from typing import Any

from ._sync import iterate_sync, run_sync
from .errors import (
    NoCompletedStepError,
)
from .llms.base import ToolChoice
from .messages import ChatMessage
from .runner_core import TaskRef
from .runner_steps import RunnerSteps
from .state import TaskState
from .streaming import StreamingAgentChatResponse
from .types import (
    AgentChatResponse,
    PendingToolCall,
    Task,
    TaskStep,
    TaskStepOutput,
)


class RunnerSync(RunnerSteps):
    """The sync twin of every async method: each runs the async one to its end (``run_sync``)."""

    def create_task(
        self, input: str, approve_tool_calls: bool | None = None, **kwargs: Any
    ) -> Task:
        return run_sync(
            self.acreate_task(input, approve_tool_calls=approve_tool_calls, **kwargs)
        )

    def delete_task(self, task_id: str) -> None:
        run_sync(self.adelete_task(task_id))

    def list_task_states(self) -> list[TaskState]:
        return run_sync(self.alist_task_states())

    def list_tasks(self, **kwargs: Any) -> list[Task]:
        return run_sync(self.alist_tasks())

    def get_task_state(self, task_id: str) -> TaskState:
        return run_sync(self._load(task_id))

    def get_task(self, task_id: str, **kwargs: Any) -> Task:
        return self.get_task_state(task_id).task

    def get_upcoming_steps(self, task_id: str, **kwargs: Any) -> list[TaskStep]:
        return list(self.get_task_state(task_id).step_queue)

    def get_completed_steps(self, task_id: str, **kwargs: Any) -> list[TaskStepOutput]:
        return list(self.get_task_state(task_id).completed_steps)

    def get_task_output(self, task_id: str, **kwargs: Any) -> TaskStepOutput:
        completed = self.get_completed_steps(task_id)
        if not completed:
            raise NoCompletedStepError(f"task {task_id!r} has no completed step yet")
        return completed[-1]

    def get_completed_tasks(self, **kwargs: Any) -> list[Task]:
        return [state.task for state in self.list_task_states() if state.is_done]

    def run_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        return run_sync(self.arun_step(task_id, input=input, step=step, **kwargs))

    def stream_step(
        self,
        task_id: TaskRef,
        input: str | None = None,
        step: TaskStep | str | None = None,
        **kwargs: Any,
    ) -> TaskStepOutput:
        output = run_sync(self.astream_step(task_id, input=input, step=step, **kwargs))
        if isinstance(output.output, StreamingAgentChatResponse):
            output.output.bind_sync(iterate_sync)
        return output

    def update_step_input(self, task_id: str, step_id: str, input: str) -> TaskStep:
        return run_sync(self.aupdate_step_input(task_id, step_id, input))

    def approve_tool_call(
        self,
        task_id: str,
        step_id: str,
        tool_id: str,
        tool_kwargs: dict[str, Any] | None = None,
    ) -> PendingToolCall:
        return run_sync(self.aapprove_tool_call(task_id, step_id, tool_id, tool_kwargs))

    def reject_tool_call(
        self, task_id: str, step_id: str, tool_id: str, reason: str
    ) -> PendingToolCall:
        return run_sync(self.areject_tool_call(task_id, step_id, tool_id, reason))

    def undo_step(
        self, task_id: str, step_id: str | None = None, **kwargs: Any
    ) -> TaskStep:
        return run_sync(self.aundo_step(task_id, step_id))

    def finalize_response(
        self, task_id: str, step_output: TaskStepOutput | None = None
    ) -> AgentChatResponse:
        response = run_sync(self.afinalize_response(task_id, step_output))
        if isinstance(response, StreamingAgentChatResponse):
            response.bind_sync(iterate_sync)
        return response

    def chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> AgentChatResponse:
        return run_sync(self.achat(message, chat_history, tool_choice))

    def query(self, query: str) -> AgentChatResponse:
        return self.chat(query)

    def stream_chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> StreamingAgentChatResponse:
        streaming = run_sync(self.astream_chat(message, chat_history, tool_choice))
        streaming.bind_sync(iterate_sync)
        return streaming
