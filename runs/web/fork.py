"""Fork here and Compare: the endpoint that forks a notebook at a step, and the compare page.

`POST /api/tasks/<id>/fork/` (JSON `{"step_id": ...}`) creates the fork (runs.store.fork) and
answers 201 with its id and URLs, or 400 with the reason; someone else's notebook is a 404.
Past the person's fork limits (runs.service.quotas) the answer is 429 `rate_limited` with
`retry_after` (and Retry-After), or 409 `quota_exceeded`: `{"error", "code"}` either way.
`GET /traces/compare/?a=<id>&b=<id>` puts two of the user's notebooks side by side; the page's
script (static/js/compare.js) draws what `GET /api/tasks/compare/?a=&b=` answers: the comparison
of runs.traces.compare, the same function the REST API's `GET /api/v1/compare` answers with.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from runs.models import Task
from runs.protocol import ErrorCode, ProtocolError
from runs.service import fork_notebook, llm_settings
from runs.service.surfaces import ForkError
from runs.traces.compare import compare_notebooks


@require_POST
def fork_task(request: HttpRequest, pk: int) -> JsonResponse:
    """Fork one of the user's notebooks right after one of its completed steps."""
    source = get_object_or_404(Task, pk=pk, owner=request.user)
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        body = None
    step_id = body.get("step_id") if isinstance(body, dict) else None
    if not isinstance(step_id, str) or not step_id:
        return JsonResponse(
            {"error": 'send a JSON object with the "step_id" of a completed step'},
            status=400,
        )
    try:
        fork = fork_notebook(source.pk, step_id)
    except ForkError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    except ProtocolError as exc:
        return _over_limit(exc)
    return JsonResponse(
        {
            "id": fork.pk,
            "title": str(fork),
            "url": reverse("runs:notebook", args=[fork.pk]),
            "trace_url": reverse("runs:trace", args=[fork.pk]),
            "compare_url": compare_url(source.pk, fork.pk),
        },
        status=201,
    )


def _over_limit(exc: ProtocolError) -> JsonResponse:
    """A fork refused by a per-person limit, as the page's fork endpoint answers it."""
    body: dict[str, Any] = {"error": exc.reason, "code": exc.code.value}
    if exc.code is not ErrorCode.RATE_LIMITED:
        return JsonResponse(body, status=409)
    body["retry_after"] = exc.retry_after
    response = JsonResponse(body, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


def compare_url(a: int, b: int) -> str:
    return f"{reverse('runs:compare')}?a={a}&b={b}"


def review_context(task: Task) -> dict[str, Any]:
    """What the notebook and trace pages need for Fork here, annotations and a fork's origin."""
    origin = None
    if task.fork_turn_index is not None:
        source = task.forked_from
        origin = {
            "title": str(source) if source else "",
            "url": reverse("runs:notebook", args=[source.pk]) if source else "",
            "compare_url": compare_url(source.pk, task.pk) if source else "",
            "turn": task.fork_turn_index,
            "step": task.fork_step_number,
        }
    return {
        "fork_origin": origin,
        "fork_url": reverse("runs:api_task_fork", args=[task.pk]),
        "annotations_url": reverse("runs:api_task_annotations", args=[task.pk]),
        "corrections_url": reverse("runs:api_task_corrections", args=[task.pk]),
        "corrected_answer_url": reverse(
            "runs:api_task_corrected_answer", args=[task.pk]
        ),
    }


def _pick(request: HttpRequest, name: str) -> Task | str:
    raw = request.GET.get(name, "")
    if (
        not raw.isdigit() or len(raw) > 18
    ):  # more digits than any id (and the database's int)
        return f"give two notebooks to compare (?a=<id>&b=<id>); {name} is {raw or 'missing'}"
    return get_object_or_404(Task, pk=int(raw), owner=request.user)


@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    """Two of the user's notebooks side by side: aligned steps, differences marked, totals."""
    picked = [_pick(request, "a"), _pick(request, "b")]
    errors = [p for p in picked if isinstance(p, str)]
    tasks = [p for p in picked if isinstance(p, Task)]
    context = {
        "error": errors[0] if errors else "",
        "sides": [
            {"task": task, "trace_url": reverse("runs:trace", args=[task.pk])}
            for task in tasks
        ]
        if not errors
        else [],
        "data_url": f"{reverse('runs:api_compare')}?a={tasks[0].pk}&b={tasks[1].pk}"
        if not errors
        else "",
    }
    return render(request, "runs/compare.html", context, status=400 if errors else 200)


@require_GET
def compare_json(request: HttpRequest) -> JsonResponse:
    """What the compare page draws (runs.traces.compare): the REST API's `GET /compare`."""
    picked = [_pick(request, "a"), _pick(request, "b")]
    errors = [p for p in picked if isinstance(p, str)]
    if errors:
        return JsonResponse({"error": errors[0]}, status=400)
    a, b = (p for p in picked if isinstance(p, Task))
    return JsonResponse(compare_notebooks(a, b, llm_settings(start_demo=False).model))
