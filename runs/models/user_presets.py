"""A person's own agents: composed notebooks' settings saved under a name (runs.service.compose)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class UserPreset(models.Model):
    """A person's own agent: a composed notebook's settings saved under a name of theirs.

    `config` is a runs.presets.compose.ComposeConfig as JSON (agent, model, tools, MCP tools,
    data tables, mode); it is checked again whenever a notebook starts from it, so a server
    revoked since gives a clear refusal instead of a notebook without the tool.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="presets"
    )
    name = models.CharField(max_length=80)
    config = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "user preset"
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], name="user_preset_name_per_owner"
            )
        ]

    def __str__(self) -> str:
        return self.name
