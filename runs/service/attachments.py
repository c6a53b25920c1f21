"""Images attached to messages: checked on upload, stored in the database, sent as image_docs.

Only PNG, JPEG, WebP and GIF are taken, recognised from their bytes (not from the name or the
browser's claim), up to `AGENTUI_MAX_IMAGE_BYTES`. Every refusal says why in words a person
can act on; nothing is stored for a refused upload.
"""

from __future__ import annotations

import base64
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse

from runs.conf import conf
from runs.engine.workers.react.images import sniff_image_type
from runs.models import Attachment
from runs.protocol import ErrorCode, ProtocolError
from runs.service.quotas import hold_pending_image

MAX_IMAGES_PER_MESSAGE = 4
ACCEPTED = "PNG, JPEG, WebP or GIF"


def max_image_bytes() -> int:
    return conf().max_image_bytes


def size_text(size: int) -> str:
    return (
        f"{size / (1024 * 1024):.1f} MB"
        if size >= 1024 * 1024
        else f"{size / 1024:.0f} KB"
    )


class ImageRefused(ValueError):
    """An upload that is not an image we take, or too large; the message says which."""


def check_image(name: str, data: bytes) -> str:
    """The image's MIME type; ImageRefused if it is empty, too large or not an accepted image."""
    limit = max_image_bytes()
    if not data:
        raise ImageRefused(f"{name or 'The file'} is empty.")
    if len(data) > limit:
        raise ImageRefused(
            f"{name or 'The image'} is {size_text(len(data))}; images may be at most {size_text(limit)}."
        )
    mime = sniff_image_type(data)
    if mime is None:
        raise ImageRefused(
            f"{name or 'The file'} is not an image this agent takes ({ACCEPTED})."
        )
    return mime


def store_upload(owner: User, name: str, data: bytes) -> Attachment:
    """Store an upload for a message to come: ImageRefused if it is not an image we take,
    ProtocolError (`quota_exceeded`) if the person has as many unsent images as they may."""
    mime = check_image(name, data)
    with transaction.atomic():
        hold_pending_image(owner.pk)
        return Attachment.objects.create(
            owner=owner, name=name[:255], mime=mime, size=len(data), data=data
        )


def describe(attachment: Attachment) -> dict[str, Any]:
    """What the page shows for an attachment (no bytes: the thumbnail loads from `url`)."""
    return {
        "id": attachment.pk,
        "name": attachment.name,
        "mime": attachment.mime,
        "size": attachment.size,
        "url": reverse("runs:image", args=[attachment.pk]),
    }


def data_url(attachment: Attachment) -> str:
    return f"data:{attachment.mime};base64,{base64.b64encode(bytes(attachment.data)).decode('ascii')}"


def claim_for_message(
    owner_id: int, task_pk: int, image_ids: list[int], accepts_images: bool
) -> list[Attachment]:
    """The owner's unsent uploads named by `image_ids`; ProtocolError when they cannot go."""
    if not image_ids:
        return []
    if not accepts_images:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            "this notebook's agent does not take images; pick Vision ReAct",
        )
    if len(image_ids) > MAX_IMAGES_PER_MESSAGE:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"a message may carry at most {MAX_IMAGES_PER_MESSAGE} images",
        )
    found = {
        a.pk: a
        for a in Attachment.objects.filter(pk__in=image_ids, owner_id=owner_id).exclude(
            task__isnull=False, turn_engine_id__gt=""
        )
    }
    missing = [i for i in image_ids if i not in found]
    if missing:
        raise ProtocolError(
            ErrorCode.NOT_FOUND,
            f"no unsent image with id {missing[0]}; upload it again",
        )
    return [found[i] for i in image_ids]


def bind_to_turn(
    attachments: list[Attachment], task_pk: int, turn_engine_id: str
) -> None:
    Attachment.objects.filter(pk__in=[a.pk for a in attachments]).update(
        task_id=task_pk, turn_engine_id=turn_engine_id
    )


def discard_upload(owner_id: int, pk: int) -> bool:
    """Delete one of the person's unsent uploads (removed from the composer); False if they
    have no such unsent image (a sent one stays with its message)."""
    deleted, _ = Attachment.objects.filter(
        pk=pk, owner_id=owner_id, turn_engine_id=""
    ).delete()
    return deleted > 0
