"""The new-notebook page's "Compose your own" part: the form's picks read once for starting a
notebook and for saving them as the person's own preset, and saving or deleting one.

Saving works without the page's script too: a refused save shows the form again as it was sent,
with the reason, and a saved one goes back to the form with a note.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs.models import ApprovalMode
from runs.protocol import ProtocolError
from runs.protocol.checks import storable_problem
from runs.service import delete_user_preset, save_user_preset, user_presets
from runs.web.confirming import Question, ask, is_confirmed
from runs.web.pages import render_new_notebook


def composed_picks(data: QueryDict) -> dict[str, Any]:
    """The compose form's model, built-in tools and data tables as the service takes them.

    The tool boxes come with a `tools_sent` marker, so "none ticked" (no tools) differs from a
    form without them (all of the agent's tools); no table ticked means all of them.
    """
    return {
        "model": data.get("model", ""),
        "tools": data.getlist("tools") if data.get("tools_sent") else None,
        "data_tables": data.getlist("data_tables") or None,
    }


def _config(data: QueryDict) -> dict[str, Any]:
    return {
        "agent": data.get("agent", ""),
        "mode": data.get("mode") or ApprovalMode.AUTO,
        "mcp_tools": data.getlist("mcp_tools"),
        **composed_picks(data),
    }


def _preset_id(data: QueryDict) -> int | None:
    raw = data.get("preset_id", "")
    return int(raw) if raw.isdigit() else None


@require_POST
def save_preset(request: HttpRequest) -> HttpResponse:
    """`POST /presets/save`: the form's picks as the person's preset `preset_name` (their
    preset `preset_id` changed, when given); the form again with the reason when refused."""
    data = request.POST
    name = data.get("preset_name", "")
    try:
        for value in (name, *data.getlist("tools"), *data.getlist("data_tables")):
            if problem := storable_problem(value):
                raise ValueError(f"the preset {problem}")
        saved = save_user_preset(
            request.user,  # type: ignore[arg-type]
            name,
            _config(data),
            _preset_id(data),
        )
    except (ProtocolError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, ProtocolError) else str(exc)
        return render_new_notebook(
            request,
            data.get("text", ""),
            data.get("agent", ""),
            data.get("mode", ""),
            error=f"Not saved: {reason}",
            status=400,
        )
    messages.success(request, f"Saved your preset “{saved['name']}”.")
    return redirect(f"{_new_url()}?preset={saved['id']}#my-presets")


@require_POST
def delete_preset(request: HttpRequest, pk: int) -> HttpResponse:
    """`POST /presets/<pk>/delete`: delete the person's preset (another's is not found).
    Unconfirmed (the page's script had not run): nothing changes, a page asks first."""
    if not is_confirmed(request):
        return _ask_to_delete(request, pk)
    try:
        delete_user_preset(request.user, pk)  # type: ignore[arg-type]
    except ProtocolError as exc:
        messages.error(request, exc.reason)
    else:
        messages.success(request, "Deleted the preset.")
    return redirect(_new_url())


def _ask_to_delete(request: HttpRequest, pk: int) -> HttpResponse:
    mine = user_presets(request.user)  # type: ignore[arg-type]
    preset = next((p for p in mine if p["id"] == pk), None)
    question = (
        Question(
            title=f"Delete your preset “{preset['name']}”?",
            text="Notebooks started from it keep their settings.",
            confirm="Delete preset",
        )
        if preset is not None
        else None
    )
    missing = f"You have no preset {pk}."
    return ask(request, question, back=_new_url(), missing=missing)


def _new_url() -> str:
    return reverse("runs:notebook_new")
