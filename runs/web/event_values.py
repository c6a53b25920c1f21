"""`GET /tasks/<pk>/events/<seq>/value?path=[...]`: one value of a stored event, whole.

What a socket carries is cut to a preview when it is large (runs.protocol.wire); each cut names the
value's path and this URL. Only the notebook's owner gets it: others get 404 (as for the
notebook itself). A text comes as a plain-text download, anything else as JSON
(runs.traces.values; the REST API has the same under /api/v1/).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from runs.models import Task
from runs.traces.values import NoValue, download, event_value, parse_path


@require_GET
def event_value_view(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    try:
        path = parse_path(request.GET.get("path", ""))
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    try:
        value = event_value(task, seq, path)
    except NoValue as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    return download(task, seq, path, value)
