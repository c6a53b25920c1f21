"""The per-minute limits' counts kept in the database (runs.service.quotas)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class MinuteCount(models.Model):
    """How many of one kind of action a person took in their current minute: the per-minute
    limit's count (runs.service.quotas) when no Redis is configured (or Redis does not answer),
    shared by every server process through the database. A person's minute starts at the first
    action after the previous minute ended, so one row per person."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    window_start = models.FloatField(help_text="epoch seconds: when this minute began")
    count = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True


class RunCount(MinuteCount):
    """Runs (turns and approvals) a person started in their current minute."""

    def __str__(self) -> str:
        return f"{self.count} runs of user {self.user_id} since {self.window_start}"


class ForkCount(MinuteCount):
    """Forks a person made in their current minute."""

    def __str__(self) -> str:
        return f"{self.count} forks of user {self.user_id} since {self.window_start}"
