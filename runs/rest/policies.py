"""Approval policies for scripts: list the rules that apply to you, add one (for all your
notebooks, or for one of them), revoke one (runs.service.policies; README "Approval policies")."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, Schema, Status

from runs.protocol import ErrorCode, ProtocolError
from runs.protocol.checks import storable_problem
from runs.rest.router import router
from runs.rest.schemas import ErrorOut, Input
from runs.service import (
    RuleSpec,
    describe_policy,
    policies_of,
    revoke_policy,
    set_policy,
)

Decision = Literal["ask", "ask_once", "allow", "refuse"]


class PolicyIn(Input):
    """A rule for calls of one tool: ask each time, ask once per notebook, allow, or refuse; for
    one notebook or all of yours, when its condition holds."""

    tool: str = Field(min_length=1, max_length=128, examples=["sql_query"])
    decision: Decision = Field(
        description="ask: always ask; ask_once: ask once per notebook; allow: never ask; "
        "refuse: never allowed (the model is told `reason`)"
    )
    notebook: int | None = Field(
        None, ge=1, le=2**31, description="one of your notebooks; none: all of them"
    )
    condition: str = Field(
        "",
        max_length=500,
        examples=["database=sample"],
        description="path=value or path!=value clauses joined by ' and '",
    )
    reason: str = Field("", max_length=500)


class PolicyOut(Schema):
    """A tool-call policy in force (or revoked): what it decides, where and when, who set it."""

    id: int
    tool: str
    decision: Decision
    condition: str
    reason: str
    summary: str = Field(examples=["always allow sql_query when database=sample"])
    scope: str
    notebook_id: int | None
    mine: bool = Field(description="yours to revoke (false: an admin's default)")
    set_by: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    revoked_by: str | None


@router.get("/policies", tags=["policies"], response=list[PolicyOut])
def list_policies(request: HttpRequest) -> list[dict[str, Any]]:
    """Your rules (revoked ones too) and the admin's defaults that apply to you, newest first."""
    return [describe_policy(r) for r in policies_of(request.auth)]  # type: ignore[attr-defined]


@router.post(
    "/policies",
    tags=["policies"],
    response={201: PolicyOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut},
)
async def add_policy(request: HttpRequest, body: PolicyIn) -> Status[Any]:
    """Add a rule; it decides the next matching calls (a rule set for a notebook is in its audit)."""
    for name in ("tool", "condition", "reason"):
        problem = storable_problem(getattr(body, name))
        if problem:
            raise ProtocolError(ErrorCode.INVALID_INPUT, f"{name}: {problem}")
    scope = "mine" if body.notebook is None else "notebook"
    spec = RuleSpec(body.tool, body.decision, scope, body.condition, body.reason)
    made = await set_policy(request.auth, spec, body.notebook)  # type: ignore[attr-defined]
    return Status(201, made)


@router.post(
    "/policies/{int:pk}/revoke",
    tags=["policies"],
    response={200: PolicyOut, 404: ErrorOut},
)
async def revoke(request: HttpRequest, pk: int) -> dict[str, Any]:
    """Revoke one of your rules (again: no change); the next matching call is decided without it."""
    return await revoke_policy(request.auth, pk)  # type: ignore[attr-defined]
