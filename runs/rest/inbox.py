"""The inbox for scripts: every step waiting for the caller across their notebooks
(`GET /inbox/`), and a notebook's deadline for its waiting steps (`PUT /notebooks/{id}/deadline`);
other agents' requests over `/mcp/` (`GET /inbox/requests`, decided with
`POST /inbox/requests/{id}/decision`).

The same list the Inbox page shows (runs.service.inbox_of); deciding on a step goes through the
notebook's own action endpoints (approve, edit, reject, answer, stop), or, as the Inbox page
decides (and as a group reviewer must: others' notebooks stay theirs), `POST /inbox/decisions`.
"""

from __future__ import annotations

from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Field, Schema, Status

from runs import service
from runs.protocol import MAX_TEXT_CHARS
from runs.rest.reading import NOT_FOUND, own_notebook
from runs.rest.router import router
from runs.rest.schemas import Accepted, ErrorOut, Input


class WaitingCallOut(Schema):
    """A tool call waiting for a person's decision, with its arguments."""

    tool_id: str
    tool_name: str
    arguments: Any = Field(description="as the model wrote them (or as last edited)")
    planned_arguments: dict[str, Any] | None = Field(
        None,
        description="a plan's call (LLMCompiler, Chain of Abstraction): its arguments as planned, "
        "with references to earlier results ($1, y1) where `arguments` holds those results; "
        "null otherwise",
    )


class WaitingStepOut(Schema):
    """A step that waits for a person (an approval, an edit, an answer): whose notebook it is,
    what it would run, since when, and its deadline."""

    notebook: int
    title: str
    agent: str
    agent_label: str
    mode: str
    owner: int = Field(description="the notebook owner's user id")
    owner_name: str = Field(
        description="the owner's username: another person's when the caller reviews their group"
    )
    turn_id: str
    step_id: str
    kind: str = Field(description="llm, tool_calls, plan or human_input (a question)")
    input: str
    calls: list[WaitingCallOut]
    question: str | None = Field(None, description="a Team member's question")
    asker: str | None = None
    since: float = Field(description="when it began waiting, epoch seconds")
    deadline_at: float | None = Field(
        None, description="when its deadline passes (epoch seconds); none: it may wait"
    )
    deadline_s: int
    deadline_action: str = Field(description="reject or stop")
    budget: dict[str, Any] | None = Field(
        None, description="it waits because a budget was reached (reason, raise_to)"
    )


class InboxOut(Schema):
    """Every step that waits for you, or for the groups you review, oldest first."""

    items: list[WaitingStepOut]
    count: int


class DeadlineIn(Input):
    """How long a notebook's steps may wait for a person, and what happens when that passes;
    null or empty: the server's default."""

    seconds: int | None = Field(
        None,
        ge=0,
        le=service.MAX_DEADLINE_S,
        description="how long a step may wait; 0: forever; null: the server's default",
    )
    action: Literal["", "reject", "stop"] = Field(
        "", description="what a passed deadline does; empty: the server's default"
    )


class DeadlineOut(Schema):
    """The deadline in force for a notebook's waiting steps, and what passing it does."""

    notebook: int
    seconds: int = Field(description="in force: 0 means no deadline")
    action: str


def _inbox(user_pk: int) -> dict[str, Any]:
    items = [step.as_json() for step in service.inbox_of(user_pk)]
    return {"items": items, "count": len(items)}


@router.get("/inbox/", tags=["read"], response=InboxOut)
async def inbox(request: HttpRequest) -> dict[str, Any]:
    """Every step waiting for you across your notebooks, the longest-waiting first."""
    return await sync_to_async(_inbox)(request.auth.pk)  # type: ignore[attr-defined]


def _set_deadline(request: HttpRequest, pk: int, body: DeadlineIn) -> dict[str, Any]:
    own_notebook(request, pk)
    service.set_deadline(pk, body.seconds, body.action)
    rule = service.deadline_of(own_notebook(request, pk))
    return {"notebook": pk, "seconds": rule.seconds, "action": rule.action}


@router.put(
    "/notebooks/{int:pk}/deadline",
    tags=["act"],
    response={200: DeadlineOut, **NOT_FOUND, 422: ErrorOut},
)
async def set_deadline(
    request: HttpRequest, pk: int, body: DeadlineIn
) -> dict[str, Any]:
    """Set the notebook's deadline for waiting steps; it applies to steps that start waiting
    from now on (what waits keeps the deadline it began with)."""
    return await sync_to_async(_set_deadline)(request, pk, body)


class DecisionIn(Input):
    """A decision on a waiting step from the inbox: approve it (perhaps edited), reject it, or
    answer its question."""

    notebook: int = Field(ge=1)
    step_id: str = Field(min_length=1, max_length=64)
    verdict: Literal["approve", "reject", "answer"]
    text: str = Field(
        "",
        max_length=MAX_TEXT_CHARS,
        description="reject: the reason (the model is told); answer: the answer",
    )
    edited: str | None = Field(
        None,
        max_length=MAX_TEXT_CHARS,
        description="approve: the step's new input, or its calls' arguments as JSON",
    )


@router.post(
    "/inbox/decisions",
    tags=["act"],
    response={202: Accepted, **NOT_FOUND, 409: ErrorOut, 422: ErrorOut},
)
async def decide_in_inbox(request: HttpRequest, body: DecisionIn) -> Status[Any]:
    """Decide a step of your inbox as the Inbox page does: yours, or, when you review a
    group (the `runs.review_group` permission), a step waiting in a group member's notebook;
    recorded under your name."""
    await service.decide_from_inbox(
        request.auth,  # type: ignore[attr-defined]
        body.notebook,
        body.step_id,
        body.verdict,
        body.text,
        body.edited,
    )
    return Status(202, {"action": f"inbox_{body.verdict}", "notebook": body.notebook})


# --- other agents' requests (asked over agentui's MCP server, docs/mcp.md) -----------------


class FormFieldOut(Schema):
    """One field of a question's form, checked from the agent's JSON schema."""

    name: str
    kind: str = Field(description="string, number, integer, boolean or enum")
    title: str
    description: str
    required: bool
    default: str | int | float | bool | None = None
    options: list[str]
    option_titles: list[str]
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None


class ExternalRequestOut(Schema):
    """A request another agent made over `/mcp/` with an API token of the person's: an
    approval of an action, or a question (answered with text, or the fields of `fields`)."""

    request: int = Field(description="its id")
    kind: Literal["approval", "question"]
    owner: int
    owner_name: str
    token_name: str = Field(description="the name of the API token the agent sent")
    client_name: str = Field(description="the agent's HTTP client, as it named itself")
    description: str = Field(
        description="what the agent asks (its own words: show as text)"
    )
    arguments: Any = Field(
        None, description="an approval's details, as the agent sent them"
    )
    fields: list[FormFieldOut] = Field(
        description="a question's form; empty: a text answer"
    )
    since: float = Field(description="when it was asked, epoch seconds")
    deadline_at: float = Field(description="when it times out, epoch seconds")


class ExternalRequestsOut(Schema):
    """Every request of other agents waiting for you, or for the groups you review."""

    items: list[ExternalRequestOut]
    count: int


class RequestAccepted(Schema):
    """A decision on another agent's request was taken."""

    action: str
    request: int


class RequestDecisionIn(Input):
    """A decision on another agent's request: approve or reject (with a reason) an approval;
    answer (with `text`, or `content` for a form) or reject a question."""

    verdict: Literal["approve", "reject", "answer"]
    text: str = Field(
        "",
        max_length=MAX_TEXT_CHARS,
        description="reject: the reason the agent is told (needed for an approval); "
        "answer: a text question's answer",
    )
    content: dict[str, str | int | float | bool | None] | None = Field(
        None, description="answer: the form's values by field name"
    )


def _requests(user_pk: int) -> dict[str, Any]:
    items = service.inbox_requests(user_pk)
    return {"items": items, "count": len(items)}


@router.get("/inbox/requests", tags=["read"], response=ExternalRequestsOut)
async def external_requests(request: HttpRequest) -> dict[str, Any]:
    """Requests of other agents (over `/mcp/`) waiting for you, the longest-waiting first."""
    return await sync_to_async(_requests)(request.auth.pk)  # type: ignore[attr-defined]


@router.post(
    "/inbox/requests/{int:pk}/decision",
    tags=["act"],
    response={202: RequestAccepted, **NOT_FOUND, 409: ErrorOut, 422: ErrorOut},
)
async def decide_request(
    request: HttpRequest, pk: int, body: RequestDecisionIn
) -> Status[Any]:
    """Decide another agent's request as the Inbox page does; its waiting call answers at once.
    404 for a request neither yours nor one you review; 409 when it no longer waits; 422 for a
    rejection without a reason or an answer that does not fit the form."""
    await service.decide_external(
        request.auth,  # type: ignore[attr-defined]
        pk,
        body.verdict,
        body.text,
        body.content if body.content is not None else body.text,
    )
    return Status(202, {"action": f"request_{body.verdict}", "request": pk})
