"""Deleting a notebook from its page (runs.service.delete_notebook), and what a link to a
deleted notebook shows.

The page's Delete form asks first (static/js/confirm.js; without the script, the confirmation
page of runs/web/confirming.py), then posts here; the notebook is deleted and the person lands
on their list of notebooks, told what was deleted. Other tabs showing it hear so over their
socket. A page of a notebook its owner deleted answers 410 with who deleted it and when.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs.models import Task
from runs.protocol import ProtocolError
from runs.service import delete_notebook, deletion_of
from runs.web.confirming import Question, ask, is_confirmed

GONE = "That notebook does not exist (any more)."


def question_for(task: Task) -> Question:
    return Question(
        title=f"Delete “{task}”?",
        text="Its whole trace (turns, steps, messages, events and images) is deleted for good; "
        "a turn going on is stopped first. Its forks stay. The deletion is on record.",
        confirm="Delete notebook",
    )


@require_POST
def delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete one of the person's notebooks, then show their list of notebooks.
    Unconfirmed (the page's script had not run): nothing changes, a page asks first."""
    task = Task.objects.filter(pk=pk, owner=request.user).first()
    if not is_confirmed(request):
        question = question_for(task) if task is not None else None
        back = reverse("runs:notebook", args=[pk])
        return ask(request, question, back=back, missing=GONE)
    if task is None:
        messages.error(request, GONE)
        return redirect("runs:traces")
    try:
        record = async_to_sync(delete_notebook)(request.user, pk)  # type: ignore[arg-type]
    except ProtocolError as exc:
        messages.error(request, exc.reason)
        return redirect("runs:traces")
    messages.success(request, f"Notebook “{record.title}” deleted.")
    return redirect("runs:traces")


def deleted_page(request: HttpRequest, pk: int) -> HttpResponse | None:
    """The 410 page of the person's notebook `pk` if they deleted it (else None)."""
    record = deletion_of(pk, request.user.pk)
    if record is None:
        return None
    return render(request, "runs/deleted.html", {"record": record}, status=410)
