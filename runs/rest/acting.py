"""Action endpoints: start a notebook, send a message, approve / edit / reject / undo / stop.

Each action is built as the websocket's client message and checked by the same rules
(`runs.protocol.validate_action`), then carried out by `runs.service.perform`, as the socket's
consumer does: the same lease makes it happen once (a second approval of the same step is a
409), the same events are stored and reach every open page live. Actions answer 202 once
taken; the steps they start run in this server process, like a page's. `GET
/notebooks/{id}/wait` answers when they have finished.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Status

from runs import service
from runs.models import Step
from runs.protocol import (
    ClientMessage,
    EditInput,
    ErrorCode,
    ProtocolError,
    SendMessage,
    validate_action,
)
from runs.rest.reading import NOT_FOUND, notebook_detail, own_notebook
from runs.rest.router import router
from runs.rest.schemas import (
    Accepted,
    AnswerIn,
    EditIn,
    ElicitationAnswerIn,
    ElicitationId,
    ErrorOut,
    MessageIn,
    ModeIn,
    NotebookDetail,
    NotebookIn,
    RejectIn,
    StepId,
    ToolId,
    UndoIn,
)

REFUSALS: dict[int | tuple[int, ...], Any] = {
    **NOT_FOUND,
    409: ErrorOut,
    422: ErrorOut,
    429: ErrorOut,
}


async def _checked(
    request: HttpRequest, pk: int, action: str, **fields: Any
) -> tuple[ClientMessage, service.Origin]:
    """The caller's action on their notebook `pk`, validated as the socket validates it."""
    await sync_to_async(own_notebook)(request, pk)
    message = validate_action({"action": action, **fields})
    by = request.auth.get_username()  # type: ignore[attr-defined]
    return message, service.Origin(action=action, by=by)


async def _act(
    request: HttpRequest, pk: int, action: str, **fields: Any
) -> Status[dict[str, Any]]:
    """Check, then perform the action as the websocket consumer does; 202 Accepted."""
    message, origin = await _checked(request, pk, action, **fields)
    await service.perform(pk, message, origin)
    return Status(202, {"action": action, "notebook": pk})


@router.post(
    "/notebooks/",
    tags=["act"],
    response={201: NotebookDetail, 404: ErrorOut, 422: ErrorOut, 429: ErrorOut},
)
async def create_notebook(request: HttpRequest, body: NotebookIn) -> Status[Any]:
    """Start a notebook with its first message; in auto and tools mode its steps start now.
    404 when `preset` is not one of yours."""
    first = validate_action(
        {"action": "send_message", "text": body.text, "images": body.images}
    )
    assert isinstance(first, SendMessage)
    task = await service.create_notebook(
        request.auth,  # type: ignore[attr-defined]
        first.text,
        body.agent,
        body.mode,
        first.images,
        body.mcp_tools,
        model=body.model,
        tools=body.tools,
        data_tables=body.data_tables,
        preset=body.preset,
    )
    return Status(201, await sync_to_async(notebook_detail)(task))


@router.post(
    "/notebooks/{int:pk}/messages", tags=["act"], response={202: Accepted, **REFUSALS}
)
async def send_message(
    request: HttpRequest, pk: int, body: MessageIn
) -> Status[dict[str, Any]]:
    """Send the next message (when no turn is going on): it starts a new turn."""
    message, origin = await _checked(
        request, pk, "send_message", text=body.text, images=list(body.images)
    )
    assert isinstance(message, SendMessage)
    # perform() answers a send_message with its new turn's id (from a turn worker too)
    turn = await service.perform(pk, message, origin)
    return Status(202, {"action": "send_message", "notebook": pk, "turn": turn})


@router.post(
    "/notebooks/{int:pk}/steps/{step_id}/approve",
    tags=["act"],
    response={202: Accepted, **REFUSALS},
)
async def approve_step(request: HttpRequest, pk: int, step_id: StepId) -> Status[Any]:
    """Run a waiting step, exactly once (a second approval is a 409)."""
    return await _act(request, pk, "approve", step_id=step_id)


@router.post(
    "/notebooks/{int:pk}/steps/{step_id}/edit",
    tags=["act"],
    response={202: Accepted, **REFUSALS},
)
async def edit_step(
    request: HttpRequest, pk: int, step_id: StepId, body: EditIn
) -> Status[Any]:
    """Change a waiting step's input; it reaches the model as your message."""
    return await _act(request, pk, "edit_input", step_id=step_id, input=body.input)


@router.post(
    "/notebooks/{int:pk}/steps/{step_id}/answer",
    tags=["act"],
    response={202: Accepted, **REFUSALS},
)
async def answer_question(
    request: HttpRequest, pk: int, step_id: StepId, body: AnswerIn
) -> Status[Any]:
    """Answer the question a Team member asked you (a waiting `human_input` step): the answer
    becomes the step's input and the step runs, as one decision (a second answer is a 409)."""
    message, origin = await _checked(
        request, pk, "edit_input", step_id=step_id, input=body.answer
    )
    assert isinstance(message, EditInput)
    kind = await (
        Step.objects.filter(task_id=pk, step_id=step_id)
        .values_list("kind", flat=True)
        .afirst()
    )
    if kind is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, "No such notebook or step.")
    if kind != "human_input":
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            f"step {step_id} is not a question (it is a {kind} step): edit and approve it",
        )
    await service.decide(
        pk,
        step_id,
        [message.input],
        origin=service.Origin(action="answer", by=origin.by),
    )
    return Status(202, {"action": "answer", "notebook": pk})


@router.post(
    "/notebooks/{int:pk}/elicitations/{elicitation_id}/answer",
    tags=["act"],
    response={202: Accepted, **REFUSALS},
)
async def answer_elicitation(
    request: HttpRequest,
    pk: int,
    elicitation_id: ElicitationId,
    body: ElicitationAnswerIn,
) -> Status[Any]:
    """Answer the question an MCP server asked you during a tool call: accept with the form's
    values (checked against the form: 422 naming the field, nothing sent), decline or cancel."""
    return await _act(
        request,
        pk,
        "answer_elicitation",
        elicitation_id=elicitation_id,
        answer=body.answer,
        content=body.content,
    )


@router.post(
    "/notebooks/{int:pk}/steps/{step_id}/tool-calls/{tool_id}/reject",
    tags=["act"],
    response={202: Accepted, **REFUSALS},
)
async def reject_tool_call(
    request: HttpRequest, pk: int, step_id: StepId, tool_id: ToolId, body: RejectIn
) -> Status[Any]:
    """Reject one tool call of a waiting step; the model is told the reason."""
    return await _act(
        request,
        pk,
        "reject_tool_call",
        step_id=step_id,
        tool_id=tool_id,
        reason=body.reason,
    )


@router.post(
    "/notebooks/{int:pk}/undo", tags=["act"], response={202: Accepted, **REFUSALS}
)
async def undo_step(request: HttpRequest, pk: int, body: UndoIn) -> Status[Any]:
    """Undo the last completed step (name it, and a doubled request undoes it once)."""
    fields = {"step_id": body.step_id} if body.step_id is not None else {}
    return await _act(request, pk, "undo", **fields)


@router.post(
    "/notebooks/{int:pk}/stop", tags=["act"], response={202: Accepted, **REFUSALS}
)
async def stop_turn(request: HttpRequest, pk: int) -> Status[Any]:
    """Stop the turn: now if a step waits, after the running step otherwise."""
    return await _act(request, pk, "abandon")


@router.post(
    "/notebooks/{int:pk}/mode", tags=["act"], response={202: Accepted, **REFUSALS}
)
async def set_mode(request: HttpRequest, pk: int, body: ModeIn) -> Status[Any]:
    """Change the approval mode; it applies from the next step."""
    return await _act(request, pk, "set_mode", mode=body.mode)


@router.post(
    "/notebooks/{int:pk}/steps/{step_id}/reject-all",
    tags=["act"],
    response={202: Accepted, **REFUSALS},
)
async def reject_all_calls(
    request: HttpRequest, pk: int, step_id: StepId, body: RejectIn
) -> Status[Any]:
    """Reject every pending call of a waiting step with one reason; the step then runs and
    the model is told (one decision, like a page's; a second one is a 409)."""
    return await _act(request, pk, "reject_all", step_id=step_id, reason=body.reason)


@router.post(
    "/notebooks/{int:pk}/approve-branches",
    tags=["act"],
    response={202: Accepted, **REFUSALS},
)
async def approve_branches(request: HttpRequest, pk: int) -> Status[Any]:
    """Approve every waiting branch of a parallel agent's turn at once (409 if none waits)."""
    return await _act(request, pk, "approve_branches")


@router.delete("/notebooks/{int:pk}", tags=["act"], response={204: None, **NOT_FOUND})
async def delete_notebook(request: HttpRequest, pk: int) -> Status[None]:
    """Delete the notebook for good: a turn going on is stopped first (as by Stop), then every
    row of it goes (turns, steps, messages, events, images). Its forks stay. The deletion is on
    record (who, when, which notebook, its title) and every open page is told. 404 for a
    notebook that is not yours (a group reviewer's included) or no longer exists."""
    await sync_to_async(own_notebook)(request, pk)
    await service.delete_notebook(request.auth, pk)  # type: ignore[attr-defined]
    return Status(204, None)
