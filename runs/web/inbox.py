"""The inbox page (every step waiting for the person, live over `ws/inbox/`), its email setting,
and a notebook's deadline setting for its waiting steps."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from runs.conf import conf
from runs.models import DeadlineAction, Task
from runs.protocol import ProtocolError
from runs.service import (
    deadline_of,
    inbox_settings_of,
    save_inbox_settings,
    set_deadline,
)

# What the notebook's deadline picker offers, in seconds ("" : the server's default).
DEADLINE_CHOICES = (
    ("", "Server default"),
    ("0", "No deadline"),
    ("60", "1 min"),
    ("300", "5 min"),
    ("600", "10 min"),
    ("1800", "30 min"),
    ("3600", "1 h"),
    ("86400", "1 day"),
)


def _page(request: HttpRequest, error: str = "", status: int = 200) -> HttpResponse:
    prefs = inbox_settings_of(request.user)  # type: ignore[arg-type]
    context = {
        "email_on_wait": prefs.email_on_wait,
        "email": request.user.email,  # type: ignore[union-attr]
        "email_every_s": int(conf().wait_email_every_s),
        "error": error,
    }
    return render(request, "runs/inbox.html", context, status=status)


@require_http_methods(["GET", "POST"])
def inbox(request: HttpRequest) -> HttpResponse:
    """GET: the inbox. POST (email_on_wait, email): the 'waiting for you' email setting."""
    if request.method == "GET":
        return _page(request)
    wanted = request.POST.get("email_on_wait") == "on"
    email = (request.POST.get("email") or "").strip()
    try:
        save_inbox_settings(request.user, wanted, email)  # type: ignore[arg-type]
    except ProtocolError as exc:
        return _page(request, exc.reason[0].upper() + exc.reason[1:] + ".", 400)
    messages.success(
        request,
        "You get an email when a step starts waiting."
        if wanted
        else "No emails about waiting steps.",
    )
    return redirect("runs:inbox")


def deadline_context(task: Task) -> dict[str, object]:
    """What the notebook's deadline picker shows: the choices and what is in force."""
    rule = deadline_of(task)
    return {
        "deadline_choices": DEADLINE_CHOICES,
        "deadline_value": ""
        if task.wait_deadline_s is None
        else str(task.wait_deadline_s),
        "deadline_actions": DeadlineAction.choices,
        "deadline_action": task.wait_deadline_action,
        "deadline_label": (
            f"{rule.words}, then {'stop' if rule.action == 'stop' else 'reject'}"
            if rule.seconds
            else "none"
        ),
    }


@require_POST
def notebook_deadline(request: HttpRequest, pk: int) -> HttpResponse:
    """Set the notebook's deadline for waiting steps (from the next step that waits)."""
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    raw = (request.POST.get("seconds") or "").strip()
    action = (request.POST.get("action") or "").strip()
    try:
        seconds = int(raw) if raw else None
        set_deadline(task.pk, seconds, action)
    except ValueError:
        messages.error(
            request, f"The deadline must be whole seconds, not “{raw[:40]}”."
        )
    except ProtocolError as exc:
        messages.error(request, f"Deadline not changed: {exc.reason}.")
    else:
        messages.success(
            request,
            "Deadline saved; it applies to steps that start waiting from now on.",
        )
    return redirect("runs:notebook", pk=task.pk)
