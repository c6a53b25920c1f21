"""Taking completed steps back out of a TaskState: what undo does, and what a fork starts from.

`restore` puts a whole checkpoint back (a step run by ``AgentRunner``: the task as it was just
before the step); `take_back` removes only one branch's changes (a step run by
``ParallelAgentRunner`` beside others). `rewind_to` applies them newest first until a given
step is the last completed one: the state the task had right after that step, as undoing every
later step would leave it.
"""

from __future__ import annotations

import copy

from .errors import UnknownStepError
from .messages import ChatMessage
from .state import Checkpoint, TaskState, TaskStatus


def without_block(
    messages: list[ChatMessage], block: list[ChatMessage]
) -> list[ChatMessage]:
    """``messages`` less the last run of consecutive messages equal to ``block``."""
    if not block:
        return messages
    size = len(block)
    for start in range(len(messages) - size, -1, -1):
        if messages[start : start + size] == block:
            return messages[:start] + messages[start + size :]
    return messages


def restore(state: TaskState, checkpoint: Checkpoint) -> list[str]:
    """Put memory, extra_state and queue back as ``checkpoint`` saw them; the ids of dropped steps."""
    kept = {s.step_id for s in checkpoint.queue}
    dropped = [s.step_id for s in state.step_queue if s.step_id not in kept]
    task = state.task
    task.memory.truncate(checkpoint.memory_length)
    task.extra_state = checkpoint.extra_state
    state.restore_queue(checkpoint.queue)
    for step_id in dropped:
        state.step_status.pop(step_id, None)
    state.step_status.pop(checkpoint.step.step_id, None)
    return dropped


def take_back(state: TaskState, checkpoint: Checkpoint, queued: set[str]) -> list[str]:
    """Remove one step's changes from ``state`` (its queued steps go); the ids of those dropped."""
    task = state.task
    if checkpoint.branch:
        task.memory.set(without_block(task.memory.get_all(), checkpoint.added_messages))
        for key in checkpoint.state_added:
            task.extra_state.pop(key, None)
        task.extra_state.update(copy.deepcopy(checkpoint.state_before))
    else:
        task.memory.truncate(checkpoint.memory_length)
        task.extra_state = checkpoint.extra_state
    dropped = [s.step_id for s in state.step_queue if s.step_id in queued]
    rest = [s for s in state.step_queue if s.step_id not in queued]
    state.restore_queue([checkpoint.step.model_copy(deep=True), *rest])
    for sid in [*dropped, checkpoint.step.step_id]:
        state.step_status.pop(sid, None)
    return dropped


def rewind_to(state: TaskState, step_id: str) -> TaskState:
    """``state`` as it stood right after completed step ``step_id`` (changed in place, returned).

    Every step completed after it is taken back, newest first, with its checkpoint: a step that
    ran alone restores the whole task, a branch takes back only what it changed. A finished
    task whose last step is taken back is active again, without a response.
    """
    ids = [done.task_step.step_id for done in state.completed_steps]
    if step_id not in ids:
        raise UnknownStepError(state.task.task_id, step_id)
    if len(state.checkpoints) != len(ids):
        raise ValueError(
            f"task {state.task.task_id!r}: its completed steps and checkpoints differ in number"
        )
    index = ids.index(step_id)
    later = range(index + 1, len(ids))
    if not any(state.checkpoints[p].branch for p in later):
        _rewind_alone(state, index)
    else:
        for position in reversed(later):
            checkpoint = state.checkpoints[position]
            output = state.completed_steps[position]
            if checkpoint.branch:
                take_back(state, checkpoint, {s.step_id for s in output.next_steps})
            else:
                restore(state, checkpoint)
            del state.completed_steps[position]
            del state.checkpoints[position]
    if len(ids) - 1 > index and state.status is TaskStatus.COMPLETED:
        state.status = TaskStatus.ACTIVE
        state.response = None
    return state


def _rewind_alone(state: TaskState, index: int) -> None:
    """`rewind_to` when every later step ran alone: restoring each newest first ends exactly at
    the oldest one's checkpoint (memory as short as the shortest), so restore that one once."""
    later = state.checkpoints[index + 1 :]
    if not later:
        return
    first = later[0]
    undone = {checkpoint.step.step_id for checkpoint in later}
    state.task.memory.truncate(min(checkpoint.memory_length for checkpoint in later))
    state.task.extra_state = first.extra_state
    del state.completed_steps[index + 1 :]
    del state.checkpoints[index + 1 :]
    state.restore_queue(first.queue)
    kept = {step.step_id for step in first.queue}
    state.step_status = {
        step_id: status
        for step_id, status in state.step_status.items()
        if step_id in kept and step_id not in undone
    }
