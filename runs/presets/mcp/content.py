"""An MCP tool result as the model and the person get it: a text, and the parts beside it.

Everything in a result is the server's, so untrusted. An image is kept only when its bytes are a
PNG, JPEG, GIF or WebP image of the type the server declared (an SVG, or bytes that lie about
their type, are refused and named), at most `AGENTUI_MAX_IMAGE_BYTES`; a blob resource at most
`AGENTUI_MCP_MAX_PART_BYTES`, offered as a download; a resource link keeps its URI as text. The
model is given the text blocks, each resource's text, and a line describing every other part
(with a link's URI), so the card can say exactly what the model saw.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from runs.conf import conf
from runs.engine.tool_parts import (
    BlobPart,
    ImagePart,
    LinkPart,
    OtherPart,
    TextResourcePart,
    ToolPart,
)
from runs.engine.workers.react.images import sniff_image_type

if TYPE_CHECKING:
    from mcp.types import CallToolResult

MAX_URI_CHARS = 2000
MAX_RESOURCE_CHARS = (
    1_000_000  # as `tools.MAX_RESULT_CHARS`: the card's copy of a resource
)
MAX_LABEL_CHARS = 300


def _label(text: object, most: int = MAX_LABEL_CHARS) -> str:
    """An untrusted short text (a name, a URI, a MIME type): printable, on one line, capped."""
    if not isinstance(text, str):
        return ""
    clean = "".join(c if c.isprintable() else " " for c in text).strip()
    return clean if len(clean) <= most else clean[: most - 1] + "…"


def _size_text(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    return f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} bytes"


def _decoded(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def image_part(data: str, declared: str) -> ImagePart:
    """An image block as kept: its bytes when they are a raster image of the declared type."""
    declared = _label(declared, 100)
    raw = _decoded(data)
    if raw is None:
        return ImagePart(
            mime="", declared_mime=declared, refused="its data is not base64"
        )
    limit = conf().max_image_bytes
    if len(raw) > limit:
        return ImagePart(
            mime="",
            declared_mime=declared,
            size=len(raw),
            refused=f"it is {_size_text(len(raw))}; images may be at most {_size_text(limit)}",
        )
    mime = sniff_image_type(raw)
    if mime is None:
        return ImagePart(
            mime="",
            declared_mime=declared,
            size=len(raw),
            refused="its bytes are not a PNG, JPEG, GIF or WebP image",
        )
    if mime != declared.lower():
        return ImagePart(
            mime=mime,
            declared_mime=declared,
            size=len(raw),
            refused=f"it said {declared or 'no type'} but its bytes are {mime}",
        )
    return ImagePart(mime=mime, declared_mime=declared, size=len(raw), data=data)


def blob_part(uri: str, data: str, mime: str) -> BlobPart:
    """A blob resource as kept: its bytes, for a download, when they fit the cap."""
    uri, mime = _label(uri, MAX_URI_CHARS), _label(mime, 100)
    raw = _decoded(data)
    if raw is None:
        return BlobPart(uri=uri, mime=mime, refused="its data is not base64")
    limit = conf().mcp_max_part_bytes
    if len(raw) > limit:
        return BlobPart(
            uri=uri,
            mime=mime,
            size=len(raw),
            refused=f"it is {_size_text(len(raw))}; files may be at most {_size_text(limit)}",
        )
    return BlobPart(uri=uri, mime=mime, size=len(raw), data=data)


def described(part: ToolPart, number: int) -> str:
    """The line the model is given for a part (a text resource: its URI, then its text)."""
    if isinstance(part, TextResourcePart):
        return (
            f"[resource {part.uri or '(no URI)'} ({part.mime or 'text'})]\n{part.text}"
        )
    if isinstance(part, ImagePart):
        if part.refused:
            return f"[image {number}: not shown: {part.refused}]"
        return f"[image {number}: {part.mime}, {_size_text(part.size)}, shown to the person]"
    if isinstance(part, BlobPart):
        what = f"[file {part.uri or '(no URI)'} ({part.mime or 'unknown type'}"
        if part.refused:
            return f"{what}): not kept: {part.refused}]"
        return f"{what}, {_size_text(part.size)}): offered to the person as a download]"
    if isinstance(part, LinkPart):
        name = f" {part.title or part.name}" if (part.title or part.name) else ""
        about = f": {part.description}" if part.description else ""
        return f"[resource link{name} <{part.uri}>{about}]"
    return f"[{part.kind or 'content'} ({part.mime or 'no type'}): not shown]"


def result_parts(result: CallToolResult) -> tuple[str, list[ToolPart]]:
    """The text the model is given for `result`, and the parts the card shows beside it."""
    from mcp.types import (
        BlobResourceContents,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    lines: list[str] = []
    parts: list[ToolPart] = []
    for block in result.content:
        part: ToolPart
        if isinstance(block, TextContent):
            lines.append(block.text)
            continue
        if isinstance(block, ImageContent):
            part = image_part(block.data, block.mime_type)
        elif isinstance(block, EmbeddedResource) and isinstance(
            block.resource, TextResourceContents
        ):
            resource = block.resource
            part = TextResourcePart(
                uri=_label(str(resource.uri), MAX_URI_CHARS),
                mime=_label(resource.mime_type or "", 100),
                text=resource.text[:MAX_RESOURCE_CHARS],
            )
        elif isinstance(block, EmbeddedResource) and isinstance(
            block.resource, BlobResourceContents
        ):
            blob = block.resource
            part = blob_part(str(blob.uri), blob.blob, blob.mime_type or "")
        elif isinstance(block, ResourceLink):
            part = LinkPart(
                uri=_label(str(block.uri), MAX_URI_CHARS),
                name=_label(block.name),
                title=_label(block.title or ""),
                description=_label(block.description or "", 1000),
                mime=_label(block.mime_type or "", 100),
            )
        else:
            part = OtherPart(
                kind=_label(getattr(block, "type", ""), 40),
                mime=_label(getattr(block, "mime_type", "") or "", 100),
            )
        parts.append(part)
        images = sum(isinstance(p, ImagePart) for p in parts)
        lines.append(described(part, images))
    if not lines and result.structured_content is not None:
        lines.append(json.dumps(result.structured_content))
    return "\n".join(lines), parts


def tabular(structured: Any) -> Any:
    """`structuredContent` as the card reads it: a tool returning a list is wrapped by its
    server as `{"result": [...]}` (MCP's structured content is an object); unwrapped here."""
    if isinstance(structured, dict) and len(structured) == 1:
        (only,) = structured.values()
        if isinstance(only, list):
            return only
    return structured
