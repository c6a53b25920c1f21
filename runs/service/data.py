"""A person's own data (runs.presets.tools.data): uploads become tables of their DuckDB database.

The entrances (the Data page, REST) call these with the user they authenticated; each runs the
DuckDB work in a thread of its own, since an import reads the whole file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import UploadedFile

from runs.conf import conf
from runs.presets.tools import data
from runs.presets.tools.data import DataError, max_file_bytes
from runs.presets.tools.sql import SQLError
from runs.telemetry import metrics

__all__ = [
    "DataError",
    "add_data_part",
    "cancel_data_upload",
    "finish_data_upload",
    "start_data_upload",
    "delete_data_table",
    "import_data_file",
    "list_data_tables",
    "max_file_bytes",
    "preview_data_table",
]


def max_post_bytes() -> int:
    """The largest file sent whole in one request (larger ones go in parts)."""
    return min(
        max_file_bytes(),
        conf().data_max_post_bytes,
    )


def _import(user_id: int, upload: UploadedFile[Any], name: str) -> dict[str, Any]:
    filename = upload.name or "upload"
    if upload.size is not None and upload.size > max_post_bytes():
        whole = max_post_bytes() == max_file_bytes()
        raise DataError(
            f"{filename!r} is {upload.size:,} bytes; files are limited to"
            f" {max_file_bytes():,} bytes"
            if whole
            else f"{filename!r} is {upload.size:,} bytes; one request takes at most"
            f" {max_post_bytes():,}: send larger files in parts (POST /api/v1/data/uploads)",
            "too_large",
        )
    on_disk = getattr(upload, "temporary_file_path", None)
    if (
        on_disk is not None
    ):  # a large upload Django already spooled to disk: read it there
        return data.import_file(user_id, Path(on_disk()), filename, name)
    return data.import_uploaded(user_id, iter(upload.chunks()), filename, name)


def _counted(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run an import, counting its outcome and time (agentui_data_imports_total)."""
    started = time.monotonic()
    try:
        table = work()
    except DataError as exc:
        metrics.data_import(exc.kind)
        raise
    metrics.data_import("ok", time.monotonic() - started)
    return table


async def import_data_file(
    user_id: int, upload: UploadedFile[Any], name: str = ""
) -> dict[str, Any]:
    """Import an uploaded file as a table of the user's database; DataError says why not."""
    return await sync_to_async(_counted, thread_sensitive=False)(
        lambda: _import(user_id, upload, name)
    )


async def list_data_tables(user_id: int) -> list[dict[str, Any]]:
    return await sync_to_async(data.list_data_tables, thread_sensitive=False)(user_id)


async def preview_data_table(user_id: int, name: str, rows: int = 20) -> dict[str, Any]:
    try:
        return await sync_to_async(data.preview, thread_sensitive=False)(
            user_id, name, rows
        )
    except SQLError as exc:
        raise DataError(str(exc)) from None


async def delete_data_table(user_id: int, name: str) -> None:
    await sync_to_async(data.delete_table, thread_sensitive=False)(user_id, name)


async def start_data_upload(
    user_id: int, filename: str, size: int, name: str = ""
) -> dict[str, Any]:
    """Begin an upload in parts (runs.presets.tools.data.PART_BYTES each)."""
    return await sync_to_async(data.start_upload, thread_sensitive=False)(
        user_id, filename, size, name
    )


async def add_data_part(user_id: int, upload_id: str, offset: int, chunk: bytes) -> int:
    return await sync_to_async(data.add_part, thread_sensitive=False)(
        user_id, upload_id, offset, chunk
    )


async def finish_data_upload(user_id: int, upload_id: str) -> dict[str, Any]:
    return await sync_to_async(_counted, thread_sensitive=False)(
        lambda: data.finish_upload(user_id, upload_id)
    )


async def cancel_data_upload(user_id: int, upload_id: str) -> None:
    await sync_to_async(data.cancel_upload, thread_sensitive=False)(user_id, upload_id)
