"""Images people attach to their messages, kept in the database."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .notebooks import Task


class Attachment(models.Model):
    """An image a person attached to a message, kept in the database with it.

    Uploaded before the message is sent (the composer shows a thumbnail), then bound to the
    notebook and the turn the message started. The bytes live here, not on a path, so a restart
    or a second server still has them.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments"
    )
    task = models.ForeignKey(
        Task,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="attachments",
    )
    turn_engine_id = models.CharField(max_length=64, blank=True, default="")
    name = models.CharField(max_length=255, blank=True, default="")
    mime = models.CharField(max_length=32)
    size = models.PositiveIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.name or f"image {self.pk}"
