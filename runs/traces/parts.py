"""A part of a tool call's result served on its own: an image for the card, a file to download.

The bytes are the stored event's (runs.presets.mcp.content checked them when the call ended) and
are checked again here, so a row edited since, or a part of another kind, is never served as
something it is not: an image only as PNG, JPEG, GIF or WebP recognised from its bytes (never
SVG), inline; a file only as `application/octet-stream`, as an attachment. The view adds
`nosniff` and a sandboxing CSP to both (runs.web.page_json.task_tool_part).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from runs.engine.workers.react.images import sniff_image_type

_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class NoPart(ValueError):
    """The call has no such part to serve; the message says why."""


@dataclass(frozen=True)
class ServedPart:
    data: bytes
    content_type: str
    disposition: str  # the Content-Disposition header


def _file_name(uri: str, fallback: str) -> str:
    last = uri.rstrip("/").rsplit("/", 1)[-1] if uri else ""
    safe = _UNSAFE.sub("_", last).strip("._")[:80]
    return safe or fallback


def served_part(payload: dict[str, Any], index: int, name: str) -> ServedPart:
    """Part `index` of a stored ToolCallResult payload, as it may be served; `name` stands in
    for a file name the part lacks. NoPart when there is none, or none that may be served."""
    parts = (payload.get("tool_output") or {}).get("parts") or []
    if not 0 <= index < len(parts) or not isinstance(parts[index], dict):
        raise NoPart(f"this call's result has no part {index}")
    part = parts[index]
    kind = part.get("type")
    if kind not in ("image", "blob"):
        raise NoPart(f"part {index} is not an image or a file")
    try:
        data = base64.b64decode(part.get("data") or "", validate=True)
    except (binascii.Error, ValueError):
        data = b""
    if not data:
        raise NoPart(f"part {index} was not kept: {part.get('refused') or 'no data'}")
    if kind == "image":
        mime = sniff_image_type(data)
        if mime is None or mime != part.get("mime"):
            raise NoPart(f"part {index} is not a PNG, JPEG, GIF or WebP image")
        file = f"{name}-{index}.{_EXTENSIONS[mime]}"
        return ServedPart(data, mime, f'inline; filename="{file}"')
    file = _file_name(str(part.get("uri") or ""), f"{name}-{index}")
    return ServedPart(
        data, "application/octet-stream", f'attachment; filename="{file}"'
    )
