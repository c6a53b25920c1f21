"""Reviewers' annotations over HTTP: `GET /api/tasks/<id>/annotations/` lists a notebook's,
`POST` (JSON, see runs.traces.annotations; `comment` ≤ 5000 chars) adds one."""

from __future__ import annotations

import json

from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_http_methods
from pydantic import ValidationError

from runs.models import Task
from runs.protocol import ProtocolError
from runs.traces.annotations import (
    NewAnnotation,
    add_annotation,
    annotation_json,
    annotations_of,
)


@require_http_methods(["GET", "POST"])
def task_annotations(request: HttpRequest, pk: int) -> JsonResponse:
    """`GET`: the notebook's annotations; `POST`: add one (400 with the reason if it does not fit)."""
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    if request.method == "GET":
        return JsonResponse({"annotations": annotations_of(task)})
    try:
        new = NewAnnotation.model_validate(json.loads(request.body or b"null"))
    except (
        ValueError,
        RecursionError,
        ValidationError,
    ) as exc:  # too deep: RecursionError
        reason = (
            "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}"
                for e in exc.errors()[:3]
            )
            if isinstance(exc, ValidationError)
            else "send a JSON object"
        )
        return JsonResponse({"error": reason}, status=400)
    try:
        note = add_annotation(task, request.user, new)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    except ProtocolError as exc:  # quota_exceeded: the step has as many notes as it may
        return JsonResponse({"error": exc.reason, "code": exc.code.value}, status=409)
    return JsonResponse({"annotation": annotation_json(note)}, status=201)
