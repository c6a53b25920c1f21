"""Turning a task's ``image_docs`` into image URLs a chat model accepts.

An item may be a file path, an http(s) URL, a ``data:`` URL, or an object (or dict) with
``image_url``, ``image_path`` or ``image`` (base64) — LlamaIndex's ImageDocument has these. A path
is read once, when the task is created, and kept as a ``data:<mime>;base64,…`` URL, so the task
does not depend on the file afterwards; an http(s) URL is passed through unchanged.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...messages import ImagePart

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image_type(data: bytes) -> str | None:
    """The MIME type of PNG, JPEG, GIF or WebP bytes, from their first bytes; None otherwise."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def data_url(data: bytes, mime: str | None = None) -> str:
    kind = mime or sniff_image_type(data)
    if kind is None:
        raise ValueError("image_docs: the data is not a PNG, JPEG, GIF or WebP image")
    return f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}"


def _from_path(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"image_docs: no image file at {path!r}")
    data = file.read_bytes()
    mime = sniff_image_type(data) or mimetypes.guess_type(file.name)[0]
    if mime is None or not mime.startswith("image/"):
        raise ValueError(f"image_docs: {path!r} is not an image")
    return data_url(data, mime)


def _from_string(value: str) -> str:
    if value.startswith(("http://", "https://", "data:")):
        return value
    return _from_path(value)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def image_url_of(item: Any) -> str:
    """One ``image_docs`` item as a URL the model can fetch or decode."""
    if isinstance(item, str):
        return _from_string(item)
    url = _field(item, "image_url")
    if url:
        return str(url)
    path = _field(item, "image_path")
    if path:
        return _from_path(str(path))
    encoded = _field(item, "image")
    if encoded:
        mime = _field(item, "image_mimetype")
        if isinstance(encoded, str) and encoded.startswith("data:"):
            return encoded
        try:
            raw = base64.b64decode(encoded, validate=True)
        except ValueError:
            raise ValueError(
                "image_docs: an item's 'image' is not valid base64"
            ) from None
        return data_url(raw, str(mime) if mime else None)
    raise ValueError(
        f"image_docs: cannot use {type(item).__name__} as an image "
        "(give a path, a URL, a data URL, or an object with image_url, image_path or image)"
    )


def image_urls(items: Any) -> list[str]:
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"image_docs must be a list, got {type(items).__name__}")
    return [image_url_of(item) for item in items]


def image_parts(urls: list[str]) -> tuple[ImagePart, ...]:
    return tuple(ImagePart(url=url) for url in urls)
