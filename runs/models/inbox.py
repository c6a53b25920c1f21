"""A person's inbox: their choices about being told a step waits, and its channel group
(runs.service.inbox)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


def inbox_group_name(user_pk: int) -> str:
    """The channel-layer group of a person's inbox: told when a notebook of theirs starts or
    stops waiting (runs.service.inbox)."""
    return f"inbox_{user_pk}"


class InboxSettings(models.Model):
    """A person's choices about being told that a step waits, and the email rate limit's state."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="inbox_settings",
    )
    email_on_wait = models.BooleanField(default=False)
    # When the last "waiting for you" email went out, and the waits since that it did not name
    last_email_at = models.DateTimeField(null=True, blank=True)
    unsent_waits = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name_plural = "inbox settings"

    def __str__(self) -> str:
        return f"inbox settings of user {self.user_id}"
