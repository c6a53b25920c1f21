"""The API tokens settings page: create a token (shown once), see when each was used, revoke."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from runs.models import ApiToken
from runs.protocol import ProtocolError
from runs.protocol.checks import storable_problem
from runs.service import create_token, revoke_token
from runs.web.confirming import Question, ask, is_confirmed

MAX_NAME_CHARS = ApiToken._meta.get_field("name").max_length or 100
GONE = "No such active token."


def _page(
    request: HttpRequest,
    *,
    new_token: str = "",
    name: str = "",
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "tokens": ApiToken.objects.filter(user=request.user),
        "new_token": new_token,
        "name": name,
        "error": error,
        "max_name_chars": MAX_NAME_CHARS,
    }
    return render(request, "runs/api_tokens.html", context, status=status)


def _name_problem(name: str) -> str | None:
    if not name:
        return "Give the token a name, e.g. the script that will use it."
    if len(name) > MAX_NAME_CHARS:
        return f"The name must be at most {MAX_NAME_CHARS} characters."
    problem = storable_problem(name)
    return f"The name {problem}." if problem else None


@require_http_methods(["GET", "POST"])
def api_tokens(request: HttpRequest) -> HttpResponse:
    """GET: the person's tokens. POST (name): create one and show it, this once only."""
    if request.method == "GET":
        return _page(request)
    name = (request.POST.get("name") or "").strip()
    problem = _name_problem(name)
    if problem:
        return _page(request, name=name, error=problem, status=400)
    try:
        _, token = create_token(request.user, name)  # type: ignore[arg-type]
    except ProtocolError as exc:  # quota_exceeded: too many active tokens
        return _page(request, name=name, error=exc.reason, status=409)
    # Rendered, not redirected: the token must not sit in a session or a URL to survive one.
    return _page(request, new_token=token, status=201)


@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one of the person's tokens; scripts using it get 401 from then on.
    Unconfirmed (the page's script had not run): nothing changes, a page asks first."""
    if not is_confirmed(request):
        token = ApiToken.objects.filter(user=request.user, pk=pk, revoked_at=None)
        name = token.values_list("name", flat=True).first()
        question = (
            Question(
                title=f"Revoke the token “{name}”?",
                text="Scripts that use it are refused from now on. This cannot be undone: "
                "a new token has to be created for them.",
                confirm="Revoke token",
            )
            if name is not None
            else None
        )
        return ask(request, question, back=reverse("runs:api_tokens"), missing=GONE)
    if revoke_token(request.user, pk):  # type: ignore[arg-type]
        messages.success(request, "Token revoked.")
    else:
        messages.error(request, GONE)
    return redirect("runs:api_tokens")
