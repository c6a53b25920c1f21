"""What a tool's result holds besides its text: images, resources and links (from MCP servers).

A part is kept with the call's `ToolOutput` so the person sees it on the tool card; the model is
given the output's text, which describes each part (`ToolOutput.content`). Bytes travel base64 in
`data` (already capped and checked by whoever made the part); a part whose bytes were refused keeps
no data and says why in `refused`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImagePart(_Part):
    """A raster image (PNG, JPEG, GIF or WebP, recognised from its bytes) shown as a thumbnail."""

    type: Literal["image"] = "image"
    mime: str  # as sniffed from the bytes; `declared_mime` is what the server said
    declared_mime: str = ""
    size: int = 0
    data: str = ""  # base64; empty when refused
    refused: str = ""


class TextResourcePart(_Part):
    """An embedded resource with text: shown as text, and given to the model."""

    type: Literal["text_resource"] = "text_resource"
    uri: str = ""
    mime: str = ""
    text: str = ""


class BlobPart(_Part):
    """An embedded resource with bytes: offered to the person as a download, never shown inline."""

    type: Literal["blob"] = "blob"
    uri: str = ""
    mime: str = ""
    size: int = 0
    data: str = ""  # base64; empty when refused
    refused: str = ""


class LinkPart(_Part):
    """A link to a resource: shown as inert text with its URI; nothing fetches it."""

    type: Literal["resource_link"] = "resource_link"
    uri: str
    name: str = ""
    title: str = ""
    description: str = ""
    mime: str = ""


class OtherPart(_Part):
    """A kind of content this app does not show (audio, say): named on the card, and to the model."""

    type: Literal["other"] = "other"
    kind: str = ""
    mime: str = ""


ToolPart = Annotated[
    ImagePart | TextResourcePart | BlobPart | LinkPart | OtherPart,
    Field(discriminator="type"),
]
