"""`GET /tasks/<pk>/events/<seq>/value?path=[...]`: one value of a stored event, whole.

What a socket carries is cut to a preview when it is large (runs.protocol.wire); each cut names the
value's path and this URL. Only the notebook's owner gets it: others get 404 (as for the
notebook itself). A text comes as a plain-text download, anything else as JSON.
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from runs.models import Event, Task
from runs.protocol.wire import value_at


@require_GET
def event_value(request: HttpRequest, pk: int, seq: int) -> HttpResponse:
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    try:
        path = json.loads(request.GET.get("path", "[]"))
    except ValueError:
        path = None
    if not isinstance(path, list):
        return JsonResponse(
            {"error": "path: expected a JSON list of keys and indices"}, status=400
        )
    payload = get_object_or_404(Event, task=task, seq=seq).payload
    try:
        value = value_at(payload, path)
    except KeyError:
        return JsonResponse(
            {"error": "this event has no value at that path"}, status=404
        )
    name = "-".join(str(p) for p in [f"notebook-{task.pk}-event-{seq}", *path])
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
    if isinstance(value, str):
        response = HttpResponse(value, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.txt"'
        return response
    response = HttpResponse(
        json.dumps(value, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    return response
