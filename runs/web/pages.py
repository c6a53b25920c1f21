"""Pages of the notebook UI: the live notebook, the new-notebook form, the trace list and a trace.

The pages are thin: they check ownership and hand the browser URLs in `data-*` attributes; the
ES modules under static/js/ fetch or stream everything else (the websocket, /api/tasks/, the
trace export).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runs.conf import conf
from runs.models import ApprovalMode, Dataset, NotebookStatus, Task
from runs.protocol import MAX_TEXT_CHARS
from runs.service import (
    MAX_IMAGES_PER_MESSAGE,
    MAX_NAME_CHARS,
    compose_choices,
    demo_examples_for,
    max_image_bytes,
    size_text,
    user_presets,
)
from runs.service.surfaces import (
    TelemetryConfig,
    all_presets,
    available_mcp_tools,
    get_preset,
    trace_id_of,
)
from runs.traces.data_used import data_tables_used
from runs.web.budgets import budget_context
from runs.web.deleting import deleted_page
from runs.web.fork import review_context
from runs.web.inbox import deadline_context

# How a notebook's summary status is coloured (the status-* classes of app.css).
_STATUS_CLASS = {
    NotebookStatus.IDLE: "completed",
    NotebookStatus.RUNNING: "running",
    NotebookStatus.WAITING: "pending",
    NotebookStatus.FAILED: "failed",
    NotebookStatus.INTERRUPTED: "interrupted",
}


@dataclass(frozen=True)
class PresetChoice:
    """An agent preset as the pickers show it."""

    name: str
    label: str
    description: str
    accepts_images: bool = False


def preset_choices() -> list[PresetChoice]:
    """The agent presets of runs.presets, for the pickers."""
    return [
        PresetChoice(p.name, p.label, p.description, p.accepts_images)
        for p in all_presets()
    ]


@dataclass(frozen=True)
class ExampleChoice:
    """An example prompt of the demo model, with its agent's name as people read it."""

    preset: str
    label: str
    prompt: str


def example_choices(user_id: int | None = None) -> list[ExampleChoice]:
    """The demo model's example prompts `user_id` can use, each with its agent preset's label
    (not its slug)."""
    labels = {p.name: p.label for p in preset_choices()}
    return [
        ExampleChoice(e.preset, labels.get(e.preset, e.preset), e.prompt)
        for e in demo_examples_for(user_id)
    ]


def image_context() -> dict[str, object]:
    """What the image picker template needs: the limits it states and checks."""
    return {
        "max_image_bytes": max_image_bytes(),
        "max_image_label": size_text(max_image_bytes()),
        "max_images": MAX_IMAGES_PER_MESSAGE,
    }


def _preset_label(name: str) -> str:
    return next((p.label for p in preset_choices() if p.name == name), name)


def _export_url(task: Task) -> str:
    return reverse("runs:api_task_trace", args=[task.pk])


def _own_task(request: HttpRequest, pk: int) -> Task:
    # Someone else's notebook is "not found", not "forbidden": its existence is private too.
    task: Task = get_object_or_404(Task, pk=pk, owner=request.user)
    return task


def _deleted(request: HttpRequest, pk: int) -> HttpResponse | None:
    """The page of a notebook the person deleted (None while it exists)."""
    if Task.objects.filter(pk=pk).exists():
        return None
    return deleted_page(request, pk)


@require_GET
def new_notebook(request: HttpRequest) -> HttpResponse:
    """The form that starts a notebook: first message, agent preset, approval mode."""
    return render_new_notebook(
        request,
        request.GET.get("text", ""),
        request.GET.get("agent", ""),
        request.GET.get("mode", ""),
    )


def render_new_notebook(
    request: HttpRequest,
    text: str,
    agent: str,
    mode: str,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    """The new-notebook form, filled in; with `error`, a refused submission shown again with its reason."""
    presets = preset_choices()
    labels = {p.name: p.label for p in presets}
    if agent not in {p.name for p in presets}:
        agent = presets[0].name if presets else ""
    if mode not in ApprovalMode.values:
        mode = ApprovalMode.AUTO
    sent = request.POST if request.method == "POST" else request.GET
    picked = sent.getlist("mcp_tools")
    context = {
        "task": None,
        "presets": presets,
        "mcp_tools": available_mcp_tools(request.user.pk),
        "mcp_picked": picked,
        "modes": ApprovalMode.choices,
        "initial_agent": agent,
        "initial_mode": mode,
        "initial_text": text,
        "max_text_chars": MAX_TEXT_CHARS,
        "error": error,
        "new_task_url": reverse("runs:task_new"),
        "examples": example_choices(request.user.pk),
        "image_presets": [p.name for p in presets if p.accepts_images],
        "sample_chart_url": reverse("runs:sample_chart"),
        "picker_hidden": agent not in {p.name for p in presets if p.accepts_images},
        **image_context(),
        **_compose_context(request, sent),
        "recent": [
            (task, labels.get(task.agent, task.agent))
            for task in Task.objects.filter(owner=request.user).order_by("-updated_at")[
                :5
            ]
        ],
    }
    return render(request, "runs/notebook.html", context, status=status)


def _compose_context(request: HttpRequest, sent: QueryDict) -> dict[str, object]:
    """What the "Compose your own" part shows: the choices, the person's presets, and the
    picks of a refused submission (the part is then open, showing them)."""
    choices = compose_choices(request.user)  # type: ignore[arg-type]
    mine = [
        {**preset, "config_json": json.dumps(preset["config"])}
        for preset in user_presets(request.user)  # type: ignore[arg-type]
    ]
    tools = sent.getlist("tools") if sent.get("tools_sent") else None
    return {
        "compose": choices,
        "my_presets": mine,
        "compose_open": bool(sent.get("tools_sent") or sent.get("preset_name")),
        "picked_model": sent.get("model", ""),
        "picked_tools": tools,
        "picked_tables": sent.getlist("data_tables"),
        "preset_name": sent.get("preset_name", ""),
        "preset_id": sent.get("preset_id", ""),
        "shown_preset": sent.get("preset", ""),
    }


def mcp_tool_info(user_id: int, picked: list[str]) -> dict[str, dict[str, Any]]:
    """What the cards show of the notebook's MCP tools: title, server, the server's hints."""
    wanted = set(picked or [])
    return {
        choice.name: {
            "title": choice.title,
            "server": choice.server,
            "hints": choice.hints,
        }
        for choice in available_mcp_tools(user_id)
        if choice.name in wanted
    }


@require_GET
def notebook(request: HttpRequest, pk: int) -> HttpResponse:
    """A live notebook: cells, step DAG and controls, fed by ws/tasks/<pk>/ (its owner
    deleted it: a page saying so, 410)."""
    gone = _deleted(request, pk)
    if gone is not None:
        return gone
    task = _own_task(request, pk)
    context = {
        "task": task,
        "agent_label": _preset_label(task.agent),
        "mcp_tools": task.mcp_tools,
        "mcp_tool_info": mcp_tool_info(request.user.pk, task.mcp_tools),
        "modes": ApprovalMode.choices,
        "ws_path": f"/ws/tasks/{task.pk}/",
        "max_text_chars": MAX_TEXT_CHARS,
        "export_url": _export_url(task),
        "delete_url": reverse("runs:notebook_delete", args=[task.pk]),
        "accepts_images": bool(
            (preset := get_preset(task.agent)) and preset.accepts_images
        ),
        **image_context(),
        **review_context(task),
        **deadline_context(task),
        **budget_context(task),
    }
    return render(request, "runs/notebook.html", context)


# The traces list's "Corrected" filter (runs.traces.corrections.with_correction).
CORRECTED_CHOICES = (
    ("", "Any"),
    ("any", "Has a correction"),
    ("edit", "Has an edit"),
    ("rejection", "Has a rejected call"),
    ("answer", "Has a corrected answer"),
)


@require_GET
def trace_list(request: HttpRequest) -> HttpResponse:
    """The person's notebooks with search, filters and paging (rows come from /api/tasks/)."""
    filters = {
        key: request.GET.get(key, "")
        for key in (
            "q",
            "agent",
            "status",
            "corrected",
            "created_after",
            "created_before",
        )
    }
    context = {
        "corrected_choices": CORRECTED_CHOICES,
        "presets": preset_choices(),
        "statuses": NotebookStatus.choices,
        "modes_json": json.dumps(dict(ApprovalMode.choices)),
        "filters": filters,
        "api_url": reverse("runs:api_tasks"),
        # the person's own datasets, which "Add to dataset" adds the picked notebooks to
        "my_datasets": Dataset.objects.filter(owner=request.user).order_by("name"),
        "datasets_api_url": reverse("api-v1:list_datasets"),
        "max_dataset_name": MAX_NAME_CHARS,
    }
    return render(request, "runs/trace_list.html", context)


@require_GET
def trace(request: HttpRequest, pk: int) -> HttpResponse:
    """One notebook's trace, read-only: totals, timeline, DAG and cells."""
    gone = _deleted(request, pk)
    if gone is not None:
        return gone
    task = _own_task(request, pk)
    context = {
        "task": task,
        "agent_label": _preset_label(task.agent),
        "status_class": _STATUS_CLASS.get(NotebookStatus(task.status), "pending"),
        "export_url": _export_url(task),
        "mcp_tool_info": mcp_tool_info(request.user.pk, task.mcp_tools),
        **review_context(task),
        "otel": _otel_traces(task),
        "data_tables": data_tables_used(task),
        # What the page draws from: the export as the page reads it (large values cut), without
        # its results section (they are in the events), fetched while the page's modules load
        # (a preload in the template).
        "trace_data_url": f"{_export_url(task)}?cut=1&results=0",
    }
    return render(request, "runs/trace.html", context)


def _otel_traces(task: Task) -> dict[str, object] | None:
    """Where this notebook's turns are in the trace store, when runs are exported (else None)."""
    config: TelemetryConfig | None = conf().telemetry
    if config is None:
        return None
    turns = task.turns.order_by("index").values_list("index", "engine_id")
    return {
        "project": config.project,
        "traces": [(index, trace_id_of(engine_id)) for index, engine_id in turns],
    }
