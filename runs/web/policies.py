"""The Policies page: the person's approval rules per tool (and the admin's defaults that apply
to them), a form to add one for all their notebooks, and revoking (runs.service.policies)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from runs.models import PolicyDecision
from runs.protocol import ProtocolError
from runs.protocol.checks import storable_problem
from runs.service import (
    RuleSpec,
    describe_policy,
    policies_of,
    revoke_policy,
    set_policy,
)
from runs.web.confirming import Question, ask, is_confirmed
from runs.web.hidden_text import reveal

FIELDS = ("tool", "decision", "condition", "reason")


def _rules(request: HttpRequest) -> list[dict[str, Any]]:
    """The person's rules as the page shows them: a tool name (from a model's call, when the
    rule was set from its card) with its hidden characters shown."""
    rules = [describe_policy(r) for r in policies_of(request.user)]  # type: ignore[arg-type]
    return [
        {**r, "tool": reveal(r["tool"]), "summary": reveal(r["summary"])} for r in rules
    ]


def _page(
    request: HttpRequest, form: dict[str, str], error: str = "", status: int = 200
) -> HttpResponse:
    rules = _rules(request)
    context: dict[str, Any] = {
        "active": [r for r in rules if r["revoked_at"] is None],
        "revoked": [r for r in rules if r["revoked_at"] is not None],
        "decisions": PolicyDecision.choices,
        "form": form,
        "error": error,
    }
    return render(request, "runs/policies.html", context, status=status)


@require_http_methods(["GET", "POST"])
def policies_page(request: HttpRequest) -> HttpResponse:
    """GET: the rules. POST (tool, decision, condition, reason): a rule for all my notebooks."""
    if request.method == "GET":
        return _page(request, {"decision": PolicyDecision.ALLOW})
    form = {name: (request.POST.get(name) or "").strip() for name in FIELDS}
    problem = next(
        (f"{n}: {p}" for n, v in form.items() if (p := storable_problem(v))), None
    )
    if problem:
        return _page(request, form, problem, 400)
    spec = RuleSpec(
        form["tool"], form["decision"], "mine", form["condition"], form["reason"]
    )
    try:
        made = async_to_sync(set_policy)(request.user, spec)  # type: ignore[arg-type]
    except ProtocolError as exc:
        return _page(request, form, exc.reason, 400)
    messages.success(request, f"Rule #{made['id']} set: {reveal(made['summary'])}.")
    return redirect("runs:policies")


@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one of the person's rules; the next matching call is decided without it.
    Unconfirmed (the page's script had not run): nothing changes, a page asks first."""
    if not is_confirmed(request):
        return _ask_to_revoke(request, pk)
    try:
        gone = async_to_sync(revoke_policy)(request.user, pk)  # type: ignore[arg-type]
    except ProtocolError as exc:
        messages.error(request, exc.reason)
    else:
        messages.success(
            request, f"Rule #{gone['id']} revoked: {reveal(gone['summary'])}."
        )
    return redirect("runs:policies")


def _ask_to_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    rule = next(
        (
            r
            for r in _rules(request)
            if r["id"] == pk and r["mine"] and r["revoked_at"] is None
        ),
        None,
    )
    question = (
        Question(
            title=f"Revoke rule #{pk}, “{rule['summary']}”?",
            text="From the next call on, this rule no longer decides: "
            "the mode or another rule does.",
            confirm="Revoke rule",
        )
        if rule is not None
        else None
    )
    missing = f"You have no rule {pk} in force."
    return ask(request, question, back=reverse("runs:policies"), missing=missing)
