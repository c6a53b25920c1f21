"""Asking before a destructive HTML form acts, on the server: a click before the page's script
(static/js/confirm.js) has run, or with JavaScript off, must not revoke or delete unasked.

Such a form's endpoint acts only when the POST carries `confirmed=yes` (the script adds it once
the person has said yes in its dialog); without it the endpoint changes nothing and answers with
a page that asks, whose button posts again with `confirmed=yes`. REST endpoints do not use this.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

CONFIRMED_FIELD = "confirmed"
CONFIRMED_VALUE = "yes"


@dataclass(frozen=True)
class Question:
    """What the confirmation page asks: its heading names the thing, `text` says what follows."""

    title: str
    text: str
    confirm: str  # the button's label, e.g. "Revoke token"


def is_confirmed(request: HttpRequest) -> bool:
    """Whether the person has said yes (in the script's dialog or on the confirmation page)."""
    return request.POST.get(CONFIRMED_FIELD) == CONFIRMED_VALUE


def ask(
    request: HttpRequest, question: Question | None, *, back: str, missing: str
) -> HttpResponse:
    """The confirmation page: its form posts to this same URL again, confirmed, and Cancel
    leads `back` (the page the form was on). No question (the person has no such thing, or it
    is gone already): back there with `missing`, naming nothing."""
    if question is None:
        messages.error(request, missing)
        return redirect(back)
    context = {
        "question": question,
        "action": request.path,
        "back": back,
        "field": CONFIRMED_FIELD,
        "value": CONFIRMED_VALUE,
    }
    return render(request, "runs/confirm.html", context)
