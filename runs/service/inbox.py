"""One inbox: every step waiting for a person across their notebooks, and deciding from there.

The list is derived from the rows (runs.service.waiting); it is sent again to the person's open
pages whenever a notebook of theirs starts or stops waiting (runs.service.status). Decisions
made in the inbox go through the same `decide` as the notebook page's, REST's and AG-UI's (in a
turn worker when the deployment has them: runs.service.dispatch).
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from runs.models import Task
from runs.protocol import ErrorCode, ProtocolError
from runs.service.dispatch import perform
from runs.service.driver import Origin
from runs.service.external_requests import external_waiting, external_waiting_count
from runs.service.reviewers import may_review, reviewees
from runs.service.waiting import (
    WaitingStep,
    waiting_count,
    waiting_for,
    waiting_notebooks,
    waiting_step,
)
from runs.service.worker_actions import Decide


def inbox_owners(user_pk: int) -> list[int]:
    """Whose waiting steps the person's inbox holds: their own, and those of the people they
    review (runs.service.reviewers)."""
    return [user_pk, *reviewees(user_pk)]


def inbox_of(user_pk: int) -> list[WaitingStep]:
    return waiting_for(inbox_owners(user_pk))


def inbox_count(user_pk: int) -> int:
    """What waits for the person: steps, and requests of other agents (runs.mcpserver)."""
    owners = inbox_owners(user_pk)
    return waiting_count(owners) + external_waiting_count(owners)


def inbox_requests(user_pk: int) -> list[dict[str, object]]:
    """The requests of other agents waiting in the person's inbox (runs.service.external_requests)."""
    return external_waiting(inbox_owners(user_pk))


def waiting_title(user_pk: int, task_pk: int | None) -> dict[str, object] | None:
    """`{notebook, title}` of the person's notebook `task_pk` if it waits (for notifications)."""
    if task_pk is None:
        return None
    title = (
        waiting_notebooks()
        .filter(pk=task_pk, owner_id=user_pk)
        .values_list("title", flat=True)
        .first()
    )
    if title is None:
        return None
    return {"notebook": task_pk, "title": title or f"Notebook {task_pk}"}


async def decide_from_inbox(
    user: User,
    task_pk: int,
    step_id: str,
    verdict: str,
    text: str = "",
    edited: str | None = None,
) -> None:
    """Approve (with edited arguments or input), reject every call with a reason, or answer a
    question: one decision through `decide`, as the notebook page's. Checked here: the owner's,
    or a reviewer's of the owner's group (runs.service.reviewers); recorded under the name of
    whoever decided."""
    owner_pk = await (
        Task.objects.filter(pk=task_pk).values_list("owner_id", flat=True).afirst()
    )
    if owner_pk is None or (
        owner_pk != user.pk
        and not await database_sync_to_async(may_review)(user.pk, owner_pk)
    ):
        raise ProtocolError(ErrorCode.NOT_FOUND, "No such notebook.")
    step = await database_sync_to_async(_step_waiting)(task_pk, step_id)
    origin = Origin(action=f"inbox_{verdict}", by=user.get_username())
    if verdict == "approve":
        inputs = [edited] if edited is not None else None
        await perform(task_pk, Decide(step_id=step_id, inputs=inputs), origin)
    elif verdict == "answer":
        if step.kind != "human_input":
            raise ProtocolError(
                ErrorCode.NOT_ALLOWED, f"step {step_id} asks no question"
            )
        if not text.strip():
            raise ProtocolError(
                ErrorCode.INVALID_INPUT, "type an answer first: the run waits for it"
            )
        await perform(task_pk, Decide(step_id=step_id, inputs=[text]), origin)
    elif verdict == "reject":
        if step.kind != "tool_calls":
            raise ProtocolError(
                ErrorCode.NOT_ALLOWED,
                f"step {step_id} runs no tool calls that could be rejected",
            )
        if not text.strip():
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                "give a reason: the model is told why its calls were rejected",
            )
        rejections = [(c.tool_id, text) for c in step.calls]
        decision = Decide(step_id=step_id, rejections=rejections)
        await perform(task_pk, decision, origin)
    else:
        raise ProtocolError(ErrorCode.UNKNOWN_ACTION, f"{verdict!r} is not a decision")


def _step_waiting(task_pk: int, step_id: str) -> WaitingStep:
    task = Task.objects.get(pk=task_pk)
    step = waiting_step(task)
    if step is None or step.step_id != step_id:
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} no longer waits (decided elsewhere?)",
        )
    return step
