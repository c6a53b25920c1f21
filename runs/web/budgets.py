"""A notebook's run budget on its page: the toolbar's form (`POST tasks/<pk>/budget`) and what
it shows. What was spent is counted live by the page (static/js/budget.js) from the events."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from runs.models import Task
from runs.protocol import ProtocolError
from runs.service import set_budget


def budget_context(task: Task) -> dict[str, object]:
    """The form's values: the notebook's own budget ("" : the server's default)."""
    return {
        "budget_own_usd": ""
        if task.budget_run_usd is None
        else f"{task.budget_run_usd.normalize():f}",
        "budget_own_tokens": ""
        if task.budget_run_tokens is None
        else str(task.budget_run_tokens),
    }


@require_POST
def notebook_budget(request: HttpRequest, pk: int) -> HttpResponse:
    """Set the notebook's run budget (blank: the server's default; 0: none)."""
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    usd = (request.POST.get("run_usd") or "").strip().lstrip("$")
    tokens = (request.POST.get("run_tokens") or "").strip().replace(",", "")
    try:
        set_budget(task.pk, usd or None, tokens or None)
    except ProtocolError as exc:
        messages.error(request, f"Budget not changed: {exc.reason}.")
    else:
        messages.success(
            request, "Budget saved; it applies from the next step that starts."
        )
    return redirect("runs:notebook", pk=task.pk)
