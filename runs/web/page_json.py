"""HTTP endpoints of the notebook service: start a notebook, list notebooks, export a trace.

Owner only everywhere: someone else's notebook is a 404, like one that does not exist.
`new_task` is an async view, so under ASGI the first turn's steps run in the server's event
loop like those started from a websocket.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.paginator import EmptyPage, Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET, require_POST

from runs import service
from runs.models import (
    ApprovalMode,
    NotebookStatus,
    Task,
)
from runs.protocol import MAX_TEXT_CHARS, ErrorCode, ProtocolError
from runs.protocol.checks import storable_problem
from runs.service.surfaces import all_presets, get_preset
from runs.traces.export import (
    filtered_notebooks,
    notebook_summary,
    trace_head,
    trace_stream,
)
from runs.traces.parts import NoPart, served_part
from runs.traces.results import (
    BadSort,
    NotTabular,
    csv_download_headers,
    csv_stream,
    csv_writer,
    find_result,
    sort_order,
)
from runs.traces.summary import summaries
from runs.web.compose import composed_picks
from runs.web.pages import render_new_notebook

PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


@require_POST
async def new_task(request: HttpRequest) -> HttpResponse:
    """`POST /tasks/new` (form: text, agent, mode, mcp_tools): create a notebook, start it, go
    to its page."""
    user = await request.auser()
    text = (request.POST.get("text") or "").strip()
    agent = request.POST.get("agent") or (
        all_presets()[0].name if all_presets() else ""
    )
    mode = str(request.POST.get("mode") or ApprovalMode.AUTO)
    images = _image_ids(request.POST.get("images") or "")
    if images is None:
        return await _refused(
            request,
            text,
            agent,
            mode,
            "The attached images could not be read; attach them again.",
        )
    if not text or len(text) > MAX_TEXT_CHARS:
        return await _refused(
            request,
            text,
            agent,
            mode,
            f"The message must be 1 to {MAX_TEXT_CHARS} characters.",
        )
    for name, value in (("message", text), ("agent", agent), ("mode", mode)):
        problem = storable_problem(value)
        if problem is not None:
            shown = text.replace("\x00", "")
            shown = shown.encode("utf-8", "replace").decode("utf-8")
            return await _refused(request, shown, agent, mode, f"The {name} {problem}.")
    try:
        preset = get_preset(agent)
        chosen = request.POST.get("user_preset", "")
        # one's own preset: the service checks its agent takes images
        if images and not chosen and not (preset and preset.accepts_images):
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                "This agent does not take images; pick Vision ReAct.",
            )
        if chosen:
            if not chosen.isdigit():
                raise ProtocolError(ErrorCode.INVALID_INPUT, "there is no such preset")
            # one's preset decides the tools and data: picks sent with it are refused, not dropped
            if request.POST.getlist("mcp_tools") or any(
                composed_picks(request.POST).values()
            ):
                raise ProtocolError(
                    ErrorCode.INVALID_INPUT,
                    "your preset sets the model, tools, MCP tools and data tables: start "
                    "with it and no picks of your own, or with your picks and no preset",
                )
            picks: dict[str, Any] = {"preset": int(chosen)}
        else:
            picks = composed_picks(request.POST)
        task = await service.create_notebook(
            user, text, agent, mode, images, request.POST.getlist("mcp_tools"), **picks
        )
    except ProtocolError as exc:
        return await _refused(request, text, agent, mode, exc.reason)
    return redirect("runs:notebook", task.pk)


def _image_ids(raw: str) -> list[int] | None:
    """The comma-separated upload ids of the form's `images` field; None when malformed."""
    try:
        return [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        return None


async def _refused(
    request: HttpRequest, text: str, agent: str, mode: str, reason: str
) -> HttpResponse:
    """The form again, as it was sent, with the reason: a refused submission loses nothing."""
    return await sync_to_async(render_new_notebook)(
        request, text, agent, mode, error=reason, status=400
    )


# --- listing ----------------------------------------------------------------------------------


def _int(raw: str | None, default: int, low: int, high: int) -> int:
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ValueError(f"expected a whole number, got {raw!r}") from None
    return max(low, min(high, value))


@require_GET
def task_list(request: HttpRequest) -> JsonResponse:
    """`GET /api/tasks/`: the user's notebooks; q (title and messages), agent, status, mode,
    created_after / created_before (dates), page, page_size."""
    params = {key: request.GET.get(key, "") for key in request.GET}
    try:
        size = _int(params.get("page_size"), PAGE_SIZE, 1, MAX_PAGE_SIZE)
        number = _int(params.get("page"), 1, 1, 10**6)
        tasks = filtered_notebooks(request.user, params)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    paginator = Paginator(
        tasks.annotate(turn_count=Count("turns")).select_related("forked_from"), size
    )
    try:
        page = paginator.page(number)
    except EmptyPage:
        page = paginator.page(paginator.num_pages)
    sizes = summaries(page.object_list, service.llm_settings(start_demo=False).model)
    return JsonResponse(
        {
            "results": [
                {**notebook_summary(task), **sizes[task.pk]}
                for task in page.object_list
            ],
            "page": page.number,
            "pages": paginator.num_pages,
            "count": paginator.count,
            "page_size": size,
            "statuses": NotebookStatus.values,
            "agents": [p.name for p in all_presets()],
        }
    )


@require_GET
def preset_list(request: HttpRequest) -> JsonResponse:
    """`GET /api/presets/`: the agent presets a notebook can use."""
    from runs.service.surfaces import demo_example_prompts

    examples: dict[str, str] = {}
    for example in demo_example_prompts():  # a preset's first example stands for it
        examples.setdefault(example.preset, example.prompt)
    return JsonResponse(
        {
            "presets": [
                {
                    "name": p.name,
                    "label": p.label,
                    "description": p.description,
                    "example": examples.get(p.name),
                }
                for p in all_presets()
            ],
            "modes": ApprovalMode.values,
        }
    )


@require_GET
def task_trace(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """`GET /api/tasks/<pk>/trace.json`: the export of one of the user's notebooks (streamed);
    `?cut=1` cuts large values to previews with download links, as the trace page reads it;
    `?results=0` leaves the results section empty (the trace page does not read it)."""
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    results = request.GET.get("results") != "0"
    response = StreamingHttpResponse(
        trace_stream(
            task,
            trace_head(task, service.llm_settings(start_demo=False).model),
            cut=request.GET.get("cut") == "1",
            results=results,
        ),
        content_type="application/json",
    )
    response["Content-Disposition"] = (
        f'inline; filename="notebook-{task.pk}-trace.json"'
    )
    return response


@require_GET
def task_result_csv(request: HttpRequest, pk: int) -> HttpResponse:
    """`GET /api/tasks/<pk>/result.csv?step=<step_id>&call=<tool_id>[&sort=<column>&order=desc]`:
    a tool call's table as CSV, in the order the person sorted it on the page, every row (a SQL query runs again without the model's row cap), streamed within the export's
    caps; a download cut short ends with a `# cut after N rows: why` line."""
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    step_id, tool_id = request.GET.get("step", ""), request.GET.get("call", "")
    payload = find_result(task, step_id, tool_id) if step_id and tool_id else None
    if payload is None:
        return JsonResponse(
            {"error": "no such tool call in this notebook (give step and call)"},
            status=404,
        )
    try:
        order = sort_order(request.GET.get("sort"), request.GET.get("order"))
        writer = csv_writer(payload, order)  # runs the query: a bad one is a 409 here
    except BadSort as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    except NotTabular as exc:
        return JsonResponse({"error": str(exc)}, status=409)
    return StreamingHttpResponse(
        csv_stream(writer),
        content_type="text/csv; charset=utf-8",
        headers=csv_download_headers(task.pk, payload, tool_id),
    )


@require_GET
def task_tool_part(request: HttpRequest, pk: int) -> HttpResponse:
    """`GET /api/tasks/<pk>/tool-part?step=<step_id>&call=<tool_id>&part=<n>`: an image of a
    tool call's result (for its card's thumbnail) or a file it carried (a download), never
    anything a browser would run: `nosniff` and a sandboxing CSP whatever it is."""
    task = get_object_or_404(Task, pk=pk, owner=request.user)
    step_id, tool_id = request.GET.get("step", ""), request.GET.get("call", "")
    payload = find_result(task, step_id, tool_id) if step_id and tool_id else None
    index = request.GET.get("part", "")
    if payload is None or not index.isdigit():
        return JsonResponse(
            {"error": "no such tool call in this notebook (give step, call and part)"},
            status=404,
        )
    name = f"notebook-{task.pk}-{tool_id}"
    try:
        part = served_part(payload, int(index), name)
    except NoPart as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    response = HttpResponse(part.data, content_type=part.content_type)
    response["Content-Disposition"] = part.disposition
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, max-age=86400"
    return response
