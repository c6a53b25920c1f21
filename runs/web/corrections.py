"""The trace page's corrections: `GET /api/tasks/<id>/corrections/` lists what people corrected
and each answered turn beside its corrected answer; `POST /api/tasks/<id>/corrected-answers/`
(JSON `turn_id`, `text`) writes a new version of one. The owner and their group reviewers only
(runs.service.reviewable_notebook): anyone else gets a 404."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from runs import service
from runs.models import Task
from runs.protocol import ErrorCode, ProtocolError
from runs.traces.corrections import answer_of, answered_turns, corrections_of


def _reviewable(request: HttpRequest, pk: int) -> Task | JsonResponse:
    try:
        return service.reviewable_notebook(request.user.pk, pk)
    except ProtocolError as exc:
        return JsonResponse({"error": exc.reason}, status=404)


@require_GET
def task_corrections(request: HttpRequest, pk: int) -> JsonResponse:
    """What people corrected in the notebook, and its answered turns with their corrections."""
    task = _reviewable(request, pk)
    if isinstance(task, JsonResponse):
        return task
    return JsonResponse(
        {
            "corrections": [c.model_dump() for c in corrections_of(task)],
            "answers": answered_turns(task),
        }
    )


def _body(request: HttpRequest) -> dict[str, Any] | None:
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, RecursionError):
        return None
    ok = isinstance(body, dict) and all(
        isinstance(body.get(k), str) for k in ("turn_id", "text")
    )
    return body if ok else None


@require_POST
def task_corrected_answer(request: HttpRequest, pk: int) -> JsonResponse:
    """Store a new version of a turn's corrected answer; 400 with the reason if it does not fit."""
    task = _reviewable(request, pk)
    if isinstance(task, JsonResponse):
        return task
    body = _body(request)
    if body is None:
        return JsonResponse(
            {"error": "send a JSON object with turn_id and text"}, status=400
        )
    try:
        service.correct_answer(task, request.user, body["turn_id"], body["text"])
    except ProtocolError as exc:
        status = 404 if exc.code is ErrorCode.NOT_FOUND else 400
        return JsonResponse({"error": exc.reason}, status=status)
    return JsonResponse({"answer": answer_of(task, body["turn_id"])}, status=201)
