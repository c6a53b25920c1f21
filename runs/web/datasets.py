"""The Review menu's dataset pages: the list (new dataset, the demo's), and a dataset's page (its
versions with what each changed, a version's examples by page, export, import, removing an
example). Each change is a new version (runs.service.datasets); the page never edits one.

Server-rendered: everything a dataset holds (messages, answers, arguments, a notebook's model
output among them) goes through the template's escaping, so it shows as text. The traces list
adds notebooks over REST (static/js/trace_list.js).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from runs import service
from runs.models import Dataset, DatasetVersion
from runs.protocol import MAX_TEXT_CHARS, ProtocolError
from runs.traces.datasets import (
    EXPORTED,
    dataset_json,
    examples_of,
    export_item,
    version_diff,
    version_of,
    versions_of,
    with_latest,
)
from runs.web.hidden_text import reveal

EXAMPLES_PER_PAGE = 25


def _plural(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _list_page(
    request: HttpRequest, form: dict[str, str], error: str = "", status: int = 200
) -> HttpResponse:
    rows = with_latest(service.readable_datasets(request.user.pk))
    context = {
        "datasets": [
            {**dataset_json(d), "mine": d.owner_id == request.user.pk} for d in rows
        ],
        "form": form,
        "error": error,
        "max_name": service.MAX_NAME_CHARS,
        "max_description": service.MAX_DESCRIPTION_CHARS,
    }
    return render(request, "runs/datasets.html", context, status=status)


@require_http_methods(["GET", "POST"])
def datasets_page(request: HttpRequest) -> HttpResponse:
    """GET: the datasets the person may read. POST (name, description): a new, empty one of
    theirs; POST demo=1: their dataset of the demo's example prompts."""
    if request.method == "GET":
        return _list_page(request, {})
    user = request.user
    form = {k: request.POST.get(k, "") for k in ("name", "description")}
    try:
        if request.POST.get("demo"):
            dataset = service.demo_dataset(user)  # type: ignore[arg-type]
        else:
            dataset = service.create_dataset(user, form["name"], form["description"])  # type: ignore[arg-type]
    except ProtocolError as exc:
        return _list_page(request, form, exc.reason, status=422)
    return redirect("runs:dataset", dataset.pk)


def _readable(request: HttpRequest, pk: int) -> Dataset:
    try:
        return service.readable_dataset(request.user.pk, pk)
    except ProtocolError:
        raise Http404("No such dataset.") from None


def _number(raw: str | None) -> int | None:
    try:
        value = int(raw or "")
    except ValueError:
        return None
    return value if 0 < value < 2**31 else None


def _shown(example: Any) -> dict[str, Any]:
    """An example as the page's row shows it: its message and answer with hidden characters
    shown, its calls as `tool(arguments)`."""
    trajectory = example.expected_trajectory or {}

    def call(c: dict[str, Any]) -> str:
        arguments = json.dumps(c.get("arguments") or {}, ensure_ascii=False)
        return reveal(f"{c.get('tool', '')}({arguments})")

    asked = example.input or {}
    return {
        "id": example.key,
        "position": example.position,
        "message": reveal(str(asked.get("message", ""))),
        "agent": asked.get("agent") or "",
        "answer": None
        if example.expected_output is None
        else reveal(example.expected_output),
        "answer_as_stored": example.expected_output
        or "",  # what its editor starts from
        "calls": [call(c) for c in trajectory.get("calls", [])],
        "refused": [
            {"call": call(c), "reason": reveal(c.get("reason") or "")}
            for c in trajectory.get("must_not_call", [])
        ],
        "metadata": example.metadata or {},
        "source_notebook": example.source_notebook,
    }


def _change_note(version: DatasetVersion) -> str:
    parts = [
        f"+{version.added:,}" if version.added else "",
        f"−{version.removed:,}" if version.removed else "",
        f"~{version.changed:,}" if version.changed else "",
    ]
    return " ".join(p for p in parts if p) or "no change"


def _dataset_context(request: HttpRequest, dataset: Dataset) -> dict[str, Any]:
    number = _number(request.GET.get("version"))
    version = version_of(dataset, number)
    if version is None and number is not None:
        raise Http404("No such version.")
    latest = version_of(dataset, None)
    context: dict[str, Any] = {
        "dataset": dataset_json(dataset),
        "dataset_pk": dataset.pk,
        "mine": dataset.owner_id == request.user.pk,
        "versions": versions_of(dataset),
        "version": version,
        "is_latest": version is not None
        and latest is not None
        and version.pk == latest.pk,
        "export_url": reverse("api-v1:export_dataset", args=[dataset.pk])
        + (f"?version={version.number}" if version else ""),
        "max_import_bytes": service.max_import_bytes(),
        "max_answer": MAX_TEXT_CHARS,
    }
    if version is not None:
        pages = Paginator(examples_of(version), EXAMPLES_PER_PAGE)
        page = pages.get_page(request.GET.get("page"))
        context["examples"] = [_shown(e) for e in page.object_list]
        context["page"] = page
        context["change"] = _change_note(version)
        earlier = (
            version_of(dataset, version.number - 1) if version.number > 1 else None
        )
        if earlier is not None:
            diff = version_diff(earlier, version)
            context["diff"] = {
                "base": earlier.number,
                "added": _plural(len(diff["added"]), "added", "added"),
                "removed": _plural(len(diff["removed"]), "removed", "removed"),
                "changed": _plural(len(diff["changed"]), "changed", "changed"),
                "same": _plural(diff["same"], "the same", "the same"),
            }
    return context


@require_http_methods(["GET"])
def dataset_page(request: HttpRequest, pk: int) -> HttpResponse:
    """A dataset: its versions, a version's examples (the newest unless `version`), by page."""
    dataset = _readable(request, pk)
    return render(request, "runs/dataset.html", _dataset_context(request, dataset))


def _refused(
    request: HttpRequest, dataset: Dataset, error: str, problems: list[Any]
) -> HttpResponse:
    context = {
        **_dataset_context(request, dataset),
        "import_error": error,
        "import_problems": problems,
    }
    return render(request, "runs/dataset.html", context, status=422)


def _owned(request: HttpRequest, pk: int) -> Dataset:
    try:
        return service.own_dataset(request.user.pk, pk)
    except ProtocolError as exc:
        if exc.code.value == "not_found":
            raise Http404("No such dataset.") from None
        raise


@require_POST
def dataset_import(request: HttpRequest, pk: int) -> HttpResponse:
    """POST a `.csv` or `.jsonl` file (`file`): the next version with its examples, or the
    page again with each bad row by its line (nothing imported)."""
    dataset = _readable(request, pk)
    upload = request.FILES.get("file")
    if upload is None:
        return _refused(request, dataset, "Choose a .csv or .jsonl file to import.", [])
    try:
        dataset = _owned(request, pk)
        version = service.import_examples(
            dataset,
            request.user,  # type: ignore[arg-type]
            upload.name or "",
            upload.read(),
        )
    except service.ImportRefused as refused:
        return _refused(
            request,
            dataset,
            "Nothing was imported: fix these rows and import the file again.",
            refused.problems,
        )
    except ProtocolError as exc:
        return _refused(request, dataset, exc.reason, [])
    messages.success(
        request,
        f"Imported into version {version.number}: "
        f"{_plural(version.example_count, 'example', 'examples')} in all.",
    )
    return redirect("runs:dataset", dataset.pk)


def _change(
    request: HttpRequest,
    pk: int,
    make: Callable[[Dataset], DatasetVersion],
    said: Callable[[DatasetVersion], str],
) -> HttpResponse:
    """Make the next version of dataset `pk` (its owner only) and say so on its page; a
    refusal is said there instead."""
    dataset = _readable(request, pk)
    try:
        version = make(_owned(request, pk))
    except ProtocolError as exc:
        messages.error(request, exc.reason)
    else:
        messages.success(request, said(version))
    return redirect("runs:dataset", dataset.pk)


@require_POST
def dataset_remove(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    """POST: the next version without example `key` (the earlier versions keep it)."""
    user: Any = request.user
    note = f"removed {key}"[: service.MAX_NOTE_CHARS]
    return _change(
        request,
        pk,
        lambda dataset: service.remove_examples(dataset, user, [key], note),
        lambda version: (
            f"Removed: version {version.number} holds "
            f"{_plural(version.example_count, 'example', 'examples')}; "
            f"version {version.number - 1} still has it."
        ),
    )


def _with_answer(dataset: Dataset, key: str, answer: str) -> dict[str, Any]:
    """Example `key` of the newest version as ExampleIn (without its id), expecting `answer`
    (empty: none); 404 when it has no such example."""
    latest = version_of(dataset, None)
    row = latest.examples.filter(key=key).values(*EXPORTED).first() if latest else None
    if row is None:
        raise Http404("No such example.")
    given = export_item(row)
    del given["id"]
    given["expected_output"]["answer"] = answer.strip() or None
    return given


@require_POST
def dataset_answer(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    """POST `answer`: the next version with example `key` expecting that answer (empty: none);
    the rest of the example as it was."""
    user: Any = request.user
    answer = request.POST.get("answer", "")
    note = f"expected answer of {key}"[: service.MAX_NOTE_CHARS]
    return _change(
        request,
        pk,
        lambda dataset: service.edit_example(
            dataset, user, key, _with_answer(dataset, key, answer), note
        ),
        lambda version: (
            f"Saved as version {version.number}; the versions before keep "
            "the answer they had."
        ),
    )
