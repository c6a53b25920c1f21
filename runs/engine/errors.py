"""Exceptions raised by the engine. Each says what went wrong in words a person can act on."""

from __future__ import annotations


class AgentError(Exception):
    """Base class of every error the engine raises on purpose."""

    code = "agent_error"


class UnknownTaskError(AgentError, KeyError, ValueError):
    """No task with that id: a KeyError as LlamaIndex's runner raises, and a ValueError as its seed says."""

    code = "unknown_task"

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no task with id {task_id!r}")
        self.task_id = task_id

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownStepError(AgentError, KeyError):
    code = "unknown_step"

    def __init__(self, task_id: str, step_id: str) -> None:
        super().__init__(f"task {task_id!r} has no upcoming step with id {step_id!r}")
        self.task_id = task_id
        self.step_id = step_id

    def __str__(self) -> str:
        return str(self.args[0])


class TaskFinishedError(AgentError, ValueError):
    """The task has no step left to run (it finished, or was abandoned)."""

    code = "task_finished"


class TaskNotDoneError(AgentError, ValueError):
    """Finalizing a task whose last step has not run yet."""

    code = "task_not_done"


class NoCompletedStepError(AgentError, ValueError):
    """Asking for a task's output before any of its steps ran."""

    code = "no_completed_step"


class StepNotEditableError(AgentError, ValueError):
    code = "step_not_editable"


class StepNotReadyError(AgentError, ValueError):
    """A step that still waits for steps before it (its ``prev_steps``) to finish."""

    code = "step_not_ready"


class NothingToUndoError(AgentError, ValueError):
    code = "nothing_to_undo"


class ToolArgumentsError(AgentError, ValueError):
    """Tool arguments that do not fit the tool's schema."""

    code = "invalid_tool_arguments"


class LLMError(AgentError):
    """The model call failed (after the client's bounded retries, or it sent nothing usable).

    ``__cause__`` is the SDK error where there is one.
    """

    code = "llm_error"

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = (
            status_code  # the HTTP status the model server answered, when it did
        )


class StepFailedError(AgentError):
    """A step raised; the task's state is as it was before the step ran, so it can be run again."""

    code = "step_failed"


class WorkflowConfigError(AgentError, ValueError):
    """An AgentWorkflow, an agent or a run was set up wrongly (what, and how to fix it, in the message)."""

    code = "workflow_config"


class WorkflowTimeoutError(AgentError, TimeoutError):
    """A workflow run took longer than its ``timeout``; its context stays restorable."""

    code = "workflow_timeout"


class WorkflowCancelledError(AgentError):
    """``handler.cancel_run()`` stopped the run; its context stays restorable."""

    code = "workflow_cancelled"
