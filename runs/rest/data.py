"""The caller's own data: upload CSV, Parquet and Excel files as DuckDB tables, list and preview
them, delete one (runs.service: import_data_file and the rest).

A refused file answers with what was wrong and leaves nothing behind: 422 for a file or name
that does not fit (wrong type, not UTF-8, no rows, a bad name), 409 for a name already taken,
413 for a file over `AGENTUI_DATA_MAX_FILE_BYTES`, 404 for a table that is not there.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Field, File, Form, Query, Schema, Status
from ninja.files import UploadedFile

from runs import service
from runs.rest.router import router
from runs.rest.schemas import ErrorOut, Input

STATUS = {
    "invalid": 422,
    "clash": 409,
    "too_large": 413,
    "not_found": 404,
    "conflict": 409,
    "too_many": 429,
    "busy": 503,
    "quota": 413,
}
CODES = {
    "invalid": "invalid_file",
    "clash": "name_taken",
    "too_large": "too_large",
    "conflict": "wrong_offset",
    "too_many": "quota_exceeded",
    "busy": "busy",
    "quota": "over_quota",
}
REFUSED: dict[int | tuple[int, ...], Any] = {
    (404, 409, 413, 422, 429, 503): ErrorOut,
}


class ColumnOut(Schema):
    """One column of a table: its name and SQL type."""

    name: str
    type: str


class DataTableOut(Schema):
    """One of your data tables: its name, number of rows and columns."""

    name: str
    rows: int
    columns: list[ColumnOut]


class DataPreviewOut(DataTableOut):
    """One of your data tables with its first rows."""

    preview: list[list[Any]]


class UploadIn(Input):
    """A large file to upload in parts: its name, its size in bytes, and the table's name
    (empty: from the file name)."""

    filename: str = Field(min_length=1, max_length=255)
    size: int = Field(ge=1)
    name: str = Field("", max_length=63)


class UploadOut(Schema):
    """An upload begun: its id, the largest part to send, and how many of its bytes have arrived."""

    id: str
    part_bytes: int
    size: int
    received: int


class PartOut(Schema):
    """How many bytes of the upload have arrived: where the next part starts."""

    received: int


def _user_id(request: HttpRequest) -> int:
    return int(request.auth.pk)  # type: ignore[attr-defined]


def _refused(exc: service.DataError) -> Status[dict[str, str]]:
    kind = getattr(exc, "kind", "invalid")
    return Status(
        STATUS.get(kind, 422), {"code": CODES.get(kind, kind), "detail": str(exc)}
    )


@router.post(
    "/data/files",
    response={201: DataTableOut, **REFUSED},
    tags=["data"],
    summary="Upload a CSV, Parquet or Excel (.xlsx) file as a table of your data",
    url_name="upload_data_file",
)
async def upload_data_file(
    request: HttpRequest,
    file: File[UploadedFile],
    name: Form[str] = "",
) -> Status[Any]:
    """The file becomes a table of your own DuckDB database, named `name` or after the file
    (`Sales 2024.csv` -> `sales_2024`); the agents' data tools can then query it."""
    try:
        table = await service.import_data_file(_user_id(request), file, name)
    except service.DataError as exc:
        return _refused(exc)
    return Status(201, table)


@router.get(
    "/data/tables",
    response={200: list[DataTableOut], **REFUSED},
    tags=["data"],
    summary="Your data tables with their columns, types and row counts",
    url_name="data_tables",
)
async def data_tables(request: HttpRequest) -> Status[Any]:
    try:
        return Status(200, await service.list_data_tables(_user_id(request)))
    except service.DataError as exc:
        return _refused(exc)


@router.get(
    "/data/tables/{name}",
    response={200: DataPreviewOut, **REFUSED},
    tags=["data"],
    summary="One data table: columns, row count and its first rows",
)
async def data_table(
    request: HttpRequest,
    name: str,
    rows: int = Query(20, ge=1, le=200),  # type: ignore[type-arg]
) -> Status[Any]:
    try:
        return Status(
            200, await service.preview_data_table(_user_id(request), name, rows)
        )
    except service.DataError as exc:
        return _refused(exc)


@router.delete(
    "/data/tables/{name}",
    response={204: None, **REFUSED},
    tags=["data"],
    summary="Delete one of your data tables",
)
async def delete_data_table(request: HttpRequest, name: str) -> Status[Any]:
    try:
        await service.delete_data_table(_user_id(request), name)
    except service.DataError as exc:
        return _refused(exc)
    return Status(204, None)


@router.post(
    "/data/uploads",
    response={201: UploadOut, **REFUSED},
    tags=["data"],
    summary="Begin uploading a large file in parts",
    url_name="start_data_upload",
)
async def start_data_upload(request: HttpRequest, body: UploadIn) -> Status[Any]:
    """For files of any size up to AGENTUI_DATA_MAX_FILE_BYTES: send the bytes with
    `PUT /data/uploads/{id}?offset=N` in parts of at most `part_bytes`, in order, then
    `POST /data/uploads/{id}/finish`. Each request stays small, whatever the file."""
    try:
        upload = await service.start_data_upload(
            _user_id(request), body.filename, body.size, body.name
        )
    except service.DataError as exc:
        return _refused(exc)
    return Status(201, upload)


@router.put(
    "/data/uploads/{upload_id}",
    response={200: PartOut, **REFUSED},
    tags=["data"],
    summary="Send the next part of an upload (the raw bytes as the body)",
    url_name="data_upload_part",
)
async def data_upload_part(
    request: HttpRequest, upload_id: str, offset: int
) -> Status[Any]:
    """`offset` is where the part starts (the bytes received so far); a wrong one is 409 and
    says where to go on from, so an interrupted upload can resume."""
    try:
        received = await service.add_data_part(
            _user_id(request), upload_id, offset, request.body
        )
    except service.DataError as exc:
        return _refused(exc)
    return Status(200, {"received": received})


@router.post(
    "/data/uploads/{upload_id}/finish",
    response={201: DataTableOut, **REFUSED},
    tags=["data"],
    summary="Import an uploaded file as a table (the upload is gone afterwards)",
    url_name="finish_data_upload",
)
async def finish_data_upload(request: HttpRequest, upload_id: str) -> Status[Any]:
    try:
        table = await service.finish_data_upload(_user_id(request), upload_id)
    except service.DataError as exc:
        return _refused(exc)
    return Status(201, table)


@router.delete(
    "/data/uploads/{upload_id}",
    response={204: None, **REFUSED},
    tags=["data"],
    summary="Cancel an upload",
)
async def cancel_data_upload(request: HttpRequest, upload_id: str) -> Status[Any]:
    try:
        await service.cancel_data_upload(_user_id(request), upload_id)
    except service.DataError as exc:
        return _refused(exc)
    return Status(204, None)


# --- database sources an admin granted (runs.service.sources) ---------------------------------

SOURCE_STATUS = {
    "not_found": 404,
    "permission": 403,
    "unreachable": 502,
    "timeout": 504,
    "read_only": 422,
    "invalid": 422,
}
SOURCE_REFUSED: dict[int | tuple[int, ...], Any] = {
    (403, 404, 422, 502, 504): ErrorOut,
}


class DbSourceOut(Schema):
    """A database source you may query: its name, what it holds, its query timeout and SQL
    dialect (never its URL)."""

    name: str
    description: str
    timeout_s: float
    dialect: str = Field(
        description="the SQL its queries are written in: PostgreSQL or MySQL"
    )


class DbTableOut(Schema):
    """One table of a database source, with its columns."""

    name: str
    columns: list[ColumnOut]


class DbPreviewOut(DbTableOut):
    """One table of a database source with its first rows (the columns of the rows as returned)."""

    preview_columns: list[str]
    preview: list[list[Any]]


def _source_refused(exc: service.DbSourceError) -> Status[dict[str, str]]:
    kind = getattr(exc, "kind", "invalid")
    return Status(SOURCE_STATUS.get(kind, 422), {"code": kind, "detail": str(exc)})


@router.get(
    "/data/sources",
    response={200: list[DbSourceOut]},
    tags=["data"],
    summary="The database sources you may query (never their URLs)",
    url_name="data_sources",
)
async def data_sources(request: HttpRequest) -> Status[Any]:
    return Status(200, await service.db_sources(_user_id(request)))


@router.get(
    "/data/sources/{name}/tables",
    response={200: list[DbTableOut], **SOURCE_REFUSED},
    tags=["data"],
    summary="The tables of one database source, with their columns",
)
async def data_source_tables(request: HttpRequest, name: str) -> Status[Any]:
    """What the source's role can read (information_schema); 502 when the database cannot be
    reached, 404 for a source you were not granted."""
    try:
        return Status(200, await service.db_source_tables(_user_id(request), name))
    except service.DbSourceError as exc:
        return _source_refused(exc)


@router.get(
    "/data/sources/{name}/tables/{table}",
    response={200: DbPreviewOut, **SOURCE_REFUSED},
    tags=["data"],
    summary="One table of a database source: columns and its first rows",
)
async def data_source_table(
    request: HttpRequest,
    name: str,
    table: str,
    rows: int = Query(20, ge=1, le=200),  # type: ignore[type-arg]
) -> Status[Any]:
    try:
        return Status(
            200,
            await service.preview_db_table(_user_id(request), name, table, rows),
        )
    except service.DbSourceError as exc:
        return _source_refused(exc)
