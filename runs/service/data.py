"""A person's own data (runs.presets.tools.data): uploads become tables of their DuckDB database.

The entrances (the Data page, REST) call these with the user they authenticated; each runs the
DuckDB work in a thread of its own, since an import reads the whole file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import UploadedFile

from runs.presets.tools import data
from runs.presets.tools.data import DataError, max_file_bytes
from runs.presets.tools.sql import SQLError

__all__ = [
    "DataError",
    "delete_data_table",
    "import_data_file",
    "list_data_tables",
    "max_file_bytes",
    "preview_data_table",
]


def _import(user_id: int, upload: UploadedFile[Any], name: str) -> dict[str, Any]:
    filename = upload.name or "upload"
    if upload.size is not None and upload.size > max_file_bytes():
        raise DataError(
            f"{filename!r} is {upload.size:,} bytes; files are limited to"
            f" {max_file_bytes():,} bytes",
            "too_large",
        )
    on_disk = getattr(upload, "temporary_file_path", None)
    if (
        on_disk is not None
    ):  # a large upload Django already spooled to disk: read it there
        return data.import_file(user_id, Path(on_disk()), filename, name)
    return data.import_uploaded(user_id, iter(upload.chunks()), filename, name)


async def import_data_file(
    user_id: int, upload: UploadedFile[Any], name: str = ""
) -> dict[str, Any]:
    """Import an uploaded file as a table of the user's database; DataError says why not."""
    return await sync_to_async(_import, thread_sensitive=False)(user_id, upload, name)


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
