"""A person's own data (runs.presets.tools.data): uploads become tables of their DuckDB database.

The entrances (the Data page, REST) call these with the user they authenticated; each runs the
DuckDB work in a thread of its own, since an import reads the whole file. Receiving a file is
runs.service.uploads', making it a table runs.service.data_import's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import UploadedFile

from runs.presets.tools import data
from runs.presets.tools.data import DataError
from runs.presets.tools.sql import SQLError
from runs.service import uploads
from runs.service.data_import import max_file_bytes
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
        lambda: uploads.import_whole(user_id, upload, name)
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
    """Begin an upload in parts (AGENTUI_DATA_PART_BYTES each)."""
    return await sync_to_async(uploads.start_upload, thread_sensitive=False)(
        user_id, filename, size, name
    )


async def add_data_part(user_id: int, upload_id: str, offset: int, chunk: bytes) -> int:
    return await sync_to_async(uploads.add_part, thread_sensitive=False)(
        user_id, upload_id, offset, chunk
    )


async def finish_data_upload(user_id: int, upload_id: str) -> dict[str, Any]:
    return await sync_to_async(_counted, thread_sensitive=False)(
        lambda: uploads.finish_upload(user_id, upload_id)
    )


async def cancel_data_upload(user_id: int, upload_id: str) -> None:
    await sync_to_async(uploads.cancel_upload, thread_sensitive=False)(
        user_id, upload_id
    )
