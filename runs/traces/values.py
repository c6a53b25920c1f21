"""One value of a stored event, whole: what a socket or stream carried cut to a preview.

The page (runs.web.event_values) and the REST API (`GET /api/v1/notebooks/{id}/events/{seq}/
value`) both answer with `download`: a text as a plain-text attachment, anything else as JSON.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse

from runs.models import Event, Task
from runs.protocol.wire import value_at


class NoValue(LookupError):
    """No such event, or no value at that path of it."""


def parse_path(text: str) -> list[Any]:
    """`?path=` as the cut names it: a JSON list of keys and indices; ValueError otherwise."""
    try:
        path = json.loads(text or "[]")
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        path = None
    if not isinstance(path, list):
        raise ValueError("path: expected a JSON list of keys and indices")
    return path


def event_value(task: Task, seq: int, path: list[Any]) -> Any:
    payload = (
        Event.objects.filter(task=task, seq=seq)
        .values_list("payload", flat=True)
        .first()
    )
    if payload is None:
        raise NoValue(f"this notebook has no event {seq}")
    try:
        return value_at(payload, path)
    except KeyError:
        raise NoValue("this event has no value at that path") from None


def download(task: Task, seq: int, path: list[Any], value: Any) -> HttpResponse:
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
