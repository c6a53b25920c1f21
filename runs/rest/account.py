"""What else the page lets a person do, for scripts: attach images to a message, see the MCP
tools they may give a notebook, and the inbox's 'waiting for you' email setting.

The same service calls as the page's endpoints (runs/web/images.py, runs/web/pages.py,
runs/web/inbox.py), with the REST API's answers: an image that is not one we take is a 422,
one over the size limit a 413, too many unsent images a 409 `quota_exceeded`; someone else's
image (or a sent one, for DELETE) a 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from ninja import Field, File, Path, Schema, Status
from ninja.files import UploadedFile

from runs import service
from runs.models import Attachment
from runs.protocol import ErrorCode, ProtocolError
from runs.rest.router import router
from runs.rest.schemas import ErrorOut, Input
from runs.service import surfaces

ImageId = Annotated[int, Path(ge=1, le=2**31 - 1)]

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class ImageOut(Schema):
    """An uploaded image, to give in a message's `images`."""

    id: int = Field(description="give it in a message's `images`")
    name: str
    mime: str
    size: int
    url: str = Field(description="the page's address of the image (session)")


def _owner(request: HttpRequest) -> Any:
    return request.auth  # type: ignore[attr-defined]


@router.post(
    "/images",
    tags=["act"],
    response={201: ImageOut, (409, 413): ErrorOut},
)
def upload_image(request: HttpRequest, image: File[UploadedFile]) -> Status[Any]:
    """An image for a message to come (PNG, JPEG, GIF or WebP, up to the server's limit):
    send its `id` in `images` of `POST /notebooks/` or `/messages`. At most a few unsent
    images wait per person (409 `quota_exceeded`); `DELETE` discards one."""
    name = image.name or "image"
    limit = service.max_image_bytes()
    if image.size is not None and image.size > limit:  # refused before it is read
        raise ProtocolError(
            ErrorCode.TOO_LARGE,
            f"{name[:100]} is {service.size_text(image.size)}; images may be at most "
            f"{service.size_text(limit)}",
        )
    try:
        attachment = service.store_upload(_owner(request), name, image.read())
    except service.ImageRefused as exc:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"image: {exc}") from None
    return Status(201, service.describe_image(attachment))


IMAGE_BYTES = {
    t: {"schema": {"type": "string", "format": "binary"}} for t in IMAGE_TYPES
}


@router.get(
    "/images/{int:image_id}",
    tags=["read"],
    response={200: None, 404: ErrorOut},
    openapi_extra={
        "responses": {200: {"description": "the image", "content": IMAGE_BYTES}}
    },
)
def get_image(request: HttpRequest, image_id: ImageId) -> HttpResponse:
    """One of your images (sent with a message or not), as it was uploaded."""
    attachment = get_object_or_404(Attachment, pk=image_id, owner=_owner(request))
    response = HttpResponse(bytes(attachment.data), content_type=attachment.mime)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=86400"
    return response


@router.delete(
    "/images/{int:image_id}",
    tags=["act"],
    response={204: None, 404: ErrorOut},
)
def discard_image(request: HttpRequest, image_id: ImageId) -> Status[None]:
    """Discard an image not sent yet (one sent stays with its message: 404)."""
    if not service.discard_upload(_owner(request).pk, image_id):
        raise ProtocolError(ErrorCode.NOT_FOUND, "No such unsent image.")
    return Status(204, None)


class McpToolOut(Schema):
    """A tool of an MCP server you may add to a notebook."""

    name: str = Field(
        description="as the model sees it, `server__tool`: give it in mcp_tools"
    )
    server: str
    tool: str
    description: str
    title: str = Field(default="", description="the server's title for people, if any")
    hints: dict[str, bool] = Field(
        default_factory=dict,
        description="readOnlyHint, destructiveHint, idempotentHint, openWorldHint as the "
        "server gave them (its word only: they skip approval only on a server the admin trusts)",
    )


@router.get("/mcp-tools", tags=["read"], response={200: list[McpToolOut]})
def list_mcp_tools(request: HttpRequest) -> list[Any]:
    """The MCP tools you may give a new notebook (`mcp_tools` of `POST /notebooks/`), as the
    new-notebook page lists them."""
    return list(surfaces.available_mcp_tools(_owner(request).pk))


class InboxSettingsOut(Schema):
    """Whether you are emailed when one of your steps starts waiting, and where."""

    email_on_wait: bool = Field(
        description="an email when one of your steps starts waiting"
    )
    email: str


class InboxSettingsIn(Input):
    """Turn the "waiting for you" emails on or off, and say where they go."""

    email_on_wait: bool
    email: str = Field("", max_length=254, description="where it goes ('' for none)")


def _inbox_settings(user: Any) -> dict[str, Any]:
    return {
        "email_on_wait": service.inbox_settings_of(user).email_on_wait,
        "email": user.email,
    }


@router.get("/inbox/settings", tags=["read"], response={200: InboxSettingsOut})
def get_inbox_settings(request: HttpRequest) -> dict[str, Any]:
    """The Inbox page's 'waiting for you' email setting."""
    return _inbox_settings(_owner(request))


@router.put("/inbox/settings", tags=["act"], response={200: InboxSettingsOut})
def set_inbox_settings(request: HttpRequest, body: InboxSettingsIn) -> dict[str, Any]:
    """Turn the 'waiting for you' email on or off (with the address it goes to), as on the
    Inbox page; 422 for an address that is not one, or none with the email on."""
    user = _owner(request)
    service.save_inbox_settings(user, body.email_on_wait, body.email.strip())
    return _inbox_settings(user)
