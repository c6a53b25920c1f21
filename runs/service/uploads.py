"""Receiving a person's data files: whole in one request, or in parts, spooled to disk with
their bytes counted, then imported (runs.service.data_import).

Under daphne a request's whole body is held in memory before the app reads it, so a large file
arrives as parts of at most AGENTUI_DATA_PART_BYTES, each appended to a file on disk, then imported from
there: memory per request stays one part, however large the file.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.core.files.uploadedfile import UploadedFile

from runs.conf import conf
from runs.presets.tools.data import DataError, user_lock
from runs.presets.tools.dataset import data_dir
from runs.service.data_import import (
    check_quota,
    checked_name,
    format_of,
    import_file,
    max_file_bytes,
)


def max_post_bytes() -> int:
    """The largest file sent whole in one request (larger ones go in parts)."""
    return min(
        max_file_bytes(),
        conf().data_max_post_bytes,
    )


def import_whole(user_id: int, upload: UploadedFile[Any], name: str) -> dict[str, Any]:
    """Import a file sent whole in one request (Django has it in memory or spooled to disk)."""
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
        return import_file(user_id, Path(on_disk()), filename, name)
    return import_uploaded(user_id, iter(upload.chunks()), filename, name)


def import_uploaded(
    user_id: int, chunks: Iterator[bytes], filename: str, name: str = ""
) -> dict[str, Any]:
    """Import a file given as chunks (an upload): written to a temporary file first, counting
    bytes so an oversized one is refused before it fills the disk."""
    format_of(filename)
    limit = max_file_bytes()
    suffix = Path(filename).suffix.lower()
    handle, raw = tempfile.mkstemp(prefix="agentui-upload-", suffix=suffix)
    path = Path(raw)
    try:
        written = 0
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise DataError(
                        f"{filename!r} is over the size limit of {limit:,} bytes",
                        "too_large",
                    )
                out.write(chunk)
        return import_file(user_id, path, filename, name)
    finally:
        path.unlink(missing_ok=True)


# --- uploads in parts (the page; scripts with large files) ------------------------------------


MAX_OPEN_UPLOADS = 3

UPLOAD_TTL_S = 24 * 3600.0

_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")


def _uploads_dir(user_id: int) -> Path:
    return data_dir() / "uploads" / str(int(user_id))


def _upload_paths(user_id: int, upload_id: str) -> tuple[Path, Path]:
    if not _UPLOAD_ID.match(upload_id):
        raise DataError("there is no such upload", "not_found")
    folder = _uploads_dir(user_id)
    meta, part = folder / f"{upload_id}.json", folder / f"{upload_id}.part"
    if not meta.exists() or not part.exists():
        raise DataError(
            "there is no such upload (finished, cancelled or expired)", "not_found"
        )
    return meta, part


def _forget_stale(folder: Path) -> None:
    now = time.time()
    for path in folder.glob("*.json"):
        try:
            stale = now - path.stat().st_mtime > UPLOAD_TTL_S
        except FileNotFoundError:
            continue
        if stale:
            path.with_suffix(".part").unlink(missing_ok=True)
            path.unlink(missing_ok=True)


def start_upload(
    user_id: int, filename: str, size: int, name: str = ""
) -> dict[str, Any]:
    """Begin an upload in parts of `size` bytes; checks what can be checked before any byte."""
    format_of(filename)
    if size <= 0:
        raise DataError(f"{filename!r} is empty")
    if size > max_file_bytes():
        raise DataError(
            f"{filename!r} is {size:,} bytes; files are limited to {max_file_bytes():,} bytes",
            "too_large",
        )
    checked_name(name, filename)
    check_quota(user_id)
    folder = _uploads_dir(user_id)
    folder.mkdir(parents=True, exist_ok=True)
    with user_lock(user_id):
        _forget_stale(folder)
        if len(list(folder.glob("*.json"))) >= MAX_OPEN_UPLOADS:
            raise DataError(
                f"you have {MAX_OPEN_UPLOADS} uploads going on; finish or cancel one first",
                "too_many",
            )
        upload_id = uuid.uuid4().hex
        (folder / f"{upload_id}.part").touch()
        (folder / f"{upload_id}.json").write_text(
            json.dumps({"filename": filename, "size": size, "name": name})
        )
    part_bytes = conf().data_part_bytes
    return {"id": upload_id, "part_bytes": part_bytes, "size": size, "received": 0}


def add_part(user_id: int, upload_id: str, offset: int, chunk: bytes) -> int:
    """Append `chunk` at `offset` (where the upload stands); returns the bytes received so far."""
    with user_lock(user_id):
        meta_path, part = _upload_paths(user_id, upload_id)
        meta = json.loads(meta_path.read_text())
        received = part.stat().st_size
        if offset != received:
            raise DataError(
                f"the next part starts at byte {received:,}, not {offset:,}", "conflict"
            )
        part_bytes = conf().data_part_bytes
        if len(chunk) > part_bytes:
            raise DataError(f"a part is at most {part_bytes:,} bytes", "too_large")
        if received + len(chunk) > meta["size"]:
            raise DataError(
                f"more bytes than the {meta['size']:,} announced for {meta['filename']!r}"
            )
        with part.open("ab") as out:
            out.write(chunk)
        meta_path.touch()  # still in use: not stale
        return received + len(chunk)


def finish_upload(user_id: int, upload_id: str) -> dict[str, Any]:
    """Import the whole uploaded file as a table; the upload is gone afterwards either way."""
    with user_lock(user_id):
        meta_path, part = _upload_paths(user_id, upload_id)
        meta = json.loads(meta_path.read_text())
        received = part.stat().st_size
        # taken out of the uploads under the lock: a second finish finds nothing
        taken = part.with_suffix(".importing")
        part.rename(taken)
        meta_path.unlink()
    try:
        if received != meta["size"]:
            raise DataError(
                f"{meta['filename']!r}: received {received:,} of {meta['size']:,} bytes"
            )
        return import_file(user_id, taken, meta["filename"], meta["name"])
    finally:
        taken.unlink(missing_ok=True)


def cancel_upload(user_id: int, upload_id: str) -> None:
    with user_lock(user_id):
        meta_path, part = _upload_paths(user_id, upload_id)
        part.unlink(missing_ok=True)
        meta_path.unlink(missing_ok=True)
