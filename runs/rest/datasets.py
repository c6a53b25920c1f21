"""Datasets for scripts: list and create them, read their versions and examples, change them
(each change a new version), import a CSV or JSONL file, export a version as JSONL.

The owner changes a dataset; their group reviewers read it (a change of theirs is a 409); anyone
else gets a 404, as for a dataset that does not exist. docs/datasets.md has the example's shape,
the import's column mapping and the export's lines.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse
from ninja import File, Query, Status
from ninja.files import UploadedFile

from runs import service
from runs.models import Dataset, DatasetVersion
from runs.protocol import ErrorCode, ProtocolError
from runs.rest.dataset_schemas import (
    CHANGE_REFUSED,
    DatasetDetail,
    DatasetIn,
    DatasetOut,
    DiffOut,
    DiffQuery,
    ExampleEditIn,
    ExampleKey,
    ExampleOut,
    ExamplesIn,
    ImportRefusedOut,
    VersionOut,
    VersionQuery,
)
from runs.rest.reading import NOT_FOUND, Page, Paging, _page
from runs.rest.router import router
from runs.rest.schemas import ErrorOut
from runs.traces.datasets import (
    dataset_json,
    example_json,
    examples_of,
    export_file_name,
    export_stream,
    version_diff,
    version_json,
    version_of,
    versions_of,
    with_latest,
)
from runs.traces.examples import notebook_examples


def _user(request: HttpRequest) -> Any:
    return request.auth  # type: ignore[attr-defined]


def readable(request: HttpRequest, pk: int) -> Dataset:
    return service.readable_dataset(_user(request).pk, pk)


def owned(request: HttpRequest, pk: int) -> Dataset:
    return service.own_dataset(_user(request).pk, pk)


# --- reading -------------------------------------------------------------------------------


def _detail(dataset: Dataset) -> dict[str, Any]:
    return {**dataset_json(dataset), "version_list": versions_of(dataset)}


def _version(dataset: Dataset, number: int | None) -> DatasetVersion:
    version = version_of(dataset, number)
    if version is None:
        raise ProtocolError(
            ErrorCode.NOT_FOUND,
            "The dataset has no version yet."
            if number is None
            else f"The dataset has no version {number}.",
        )
    return version


@router.get("/datasets/", tags=["datasets"], response={200: Page[DatasetOut]})
def list_datasets(request: HttpRequest, paging: Query[Paging]) -> dict[str, Any]:
    """Your datasets and those of the people whose work you review, newest first."""
    rows = with_latest(service.readable_datasets(_user(request).pk))
    items, meta = _page(rows, paging)
    return {"items": [dataset_json(d) for d in items], **meta}


@router.get(
    "/datasets/{int:pk}", tags=["datasets"], response={200: DatasetDetail, **NOT_FOUND}
)
def get_dataset(request: HttpRequest, pk: int) -> dict[str, Any]:
    """The dataset with its versions, newest first."""
    return _detail(readable(request, pk))


@router.get(
    "/datasets/{int:pk}/versions",
    tags=["datasets"],
    response={200: list[VersionOut], **NOT_FOUND},
)
def list_versions(request: HttpRequest, pk: int) -> list[dict[str, Any]]:
    """Every version of the dataset, newest first, with what each changed."""
    return versions_of(readable(request, pk))


@router.get(
    "/datasets/{int:pk}/examples",
    tags=["datasets"],
    response={200: Page[ExampleOut], **NOT_FOUND},
)
def list_examples(
    request: HttpRequest, pk: int, which: Query[VersionQuery], paging: Query[Paging]
) -> dict[str, Any]:
    """The examples of a version (the newest unless `version` names one), in order."""
    version = _version(readable(request, pk), which.version)
    items, meta = _page(examples_of(version), paging)
    return {"items": [example_json(e) for e in items], **meta}


@router.get(
    "/datasets/{int:pk}/diff", tags=["datasets"], response={200: DiffOut, **NOT_FOUND}
)
def diff_versions(
    request: HttpRequest, pk: int, which: Query[DiffQuery]
) -> dict[str, Any]:
    """What changed from version `base` to version `to` (the newest when left out)."""
    dataset = readable(request, pk)
    return version_diff(_version(dataset, which.base), _version(dataset, which.to))


@router.get(
    "/datasets/{int:pk}/export",
    tags=["datasets"],
    response={200: None, **NOT_FOUND},
    openapi_extra={
        "responses": {
            200: {
                "description": "One example a line: `id`, `input`, `expected_output` "
                "(`answer`, `trajectory`, `must_not_call`), `metadata` — a Langfuse or "
                "LangSmith dataset item (docs/datasets.md)",
                "content": {"application/jsonl": {"schema": {"type": "string"}}},
            }
        }
    },
)
async def export_dataset(
    request: HttpRequest, pk: int, which: Query[VersionQuery]
) -> StreamingHttpResponse:
    """A version (the newest unless `version` names one) as JSONL, streamed."""

    def find() -> tuple[Dataset, DatasetVersion]:
        dataset = readable(request, pk)
        return dataset, _version(dataset, which.version)

    dataset, version = await sync_to_async(find)()
    response = StreamingHttpResponse(
        export_stream(version), content_type="application/jsonl"
    )
    name = export_file_name(dataset, version)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# --- changing ------------------------------------------------------------------------------


def _given(examples: list[service.ExampleIn]) -> list[Any]:
    return [service.checked_example(e.model_dump(exclude_unset=True)) for e in examples]


def from_notebooks(user: Any, pks: list[int]) -> list[Any]:
    """The examples notebooks `pks` make, each one `user` may review (else a 404 names it)."""
    if not pks:
        return []
    tasks = service.reviewable_notebooks(user.pk, pks)
    model = service.llm_settings(start_demo=False).model
    made = notebook_examples(tasks, model, user.get_username())
    return [service.notebook_example(pk, example) for pk, example in made]


def _create(request: HttpRequest, body: DatasetIn) -> dict[str, Any]:
    user = _user(request)
    examples = [
        *from_notebooks(user, body.notebooks),
        *_given(body.examples),
    ]
    dataset = service.create_dataset(user, body.name, body.description, examples)
    return _detail(dataset)


@router.post(
    "/datasets/",
    tags=["datasets"],
    response={201: DatasetDetail, **CHANGE_REFUSED},
)
async def create_dataset(request: HttpRequest, body: DatasetIn) -> Status[Any]:
    """A new dataset of yours; version 1 holds the notebooks' examples, then those given.
    A name you already use is a 409."""
    return Status(201, await sync_to_async(_create)(request, body))


def _add(request: HttpRequest, pk: int, body: ExamplesIn) -> dict[str, Any]:
    dataset = owned(request, pk)
    user = _user(request)
    examples = [
        *from_notebooks(user, body.notebooks),
        *_given(body.examples),
    ]
    return version_json(service.add_examples(dataset, user, examples, body.note))


@router.post(
    "/datasets/{int:pk}/examples",
    tags=["datasets"],
    response={201: VersionOut, **CHANGE_REFUSED},
)
async def add_examples(request: HttpRequest, pk: int, body: ExamplesIn) -> Status[Any]:
    """The next version, with the notebooks' examples and those given added (an example whose
    id is there already is replaced; a notebook added again, by what it makes now). Nothing
    changed: the newest version, no new one."""
    return Status(201, await sync_to_async(_add)(request, pk, body))


def _edit(
    request: HttpRequest, pk: int, key: str, body: ExampleEditIn
) -> dict[str, Any]:
    dataset = owned(request, pk)
    given = body.example.model_dump(exclude_unset=True)
    given.pop("id", None)
    version = service.edit_example(dataset, _user(request), key, given, body.note)
    return version_json(version)


@router.put(
    "/datasets/{int:pk}/examples/{key}",
    tags=["datasets"],
    response={200: VersionOut, **CHANGE_REFUSED},
)
async def edit_example(
    request: HttpRequest, pk: int, key: ExampleKey, body: ExampleEditIn
) -> dict[str, Any]:
    """The next version, with example `key` as given (earlier versions keep it as it was)."""
    return await sync_to_async(_edit)(request, pk, key, body)


def _remove(request: HttpRequest, pk: int, key: str) -> dict[str, Any]:
    dataset = owned(request, pk)
    return version_json(
        service.remove_examples(dataset, _user(request), [key], f"removed {key}"[:300])
    )


@router.delete(
    "/datasets/{int:pk}/examples/{key}",
    tags=["datasets"],
    response={200: VersionOut, 404: ErrorOut, 409: ErrorOut},
)
async def remove_example(
    request: HttpRequest, pk: int, key: ExampleKey
) -> dict[str, Any]:
    """The next version, without example `key` (earlier versions keep it)."""
    return await sync_to_async(_remove)(request, pk, key)


def _import(request: HttpRequest, pk: int, file: UploadedFile) -> Status[Any]:
    dataset = owned(request, pk)
    try:
        version = service.import_examples(
            dataset, _user(request), file.name or "", file.read()
        )
    except service.ImportRefused as refused:
        return Status(
            422,
            {
                "code": refused.code.value,
                "detail": refused.reason,
                "problems": [
                    {"line": line, "problem": what} for line, what in refused.problems
                ],
            },
        )
    return Status(201, version_json(version))


@router.post(
    "/datasets/{int:pk}/import",
    tags=["datasets"],
    response={
        201: VersionOut,
        404: ErrorOut,
        409: ErrorOut,
        413: ErrorOut,
        422: ImportRefusedOut,
    },
)
async def import_examples(
    request: HttpRequest, pk: int, file: File[UploadedFile]
) -> Status[Any]:
    """The next version, with every example of a `.csv` or `.jsonl` file added (columns and
    lines: docs/datasets.md). One bad row refuses the file, naming each bad row by its line;
    nothing is imported then."""
    return await sync_to_async(_import)(request, pk, file)


@router.post(
    "/datasets/demo", tags=["datasets"], response={201: DatasetDetail, 409: ErrorOut}
)
async def make_demo_dataset(request: HttpRequest) -> Status[Any]:
    """Your dataset of the offline demo's example prompts (made once; the same one after)."""

    def make() -> dict[str, Any]:
        return _detail(service.demo_dataset(_user(request)))

    return Status(201, await sync_to_async(make)())
