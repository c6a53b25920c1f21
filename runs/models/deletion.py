"""The record a deleted notebook leaves behind (runs.service.deletion)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class DeletedNotebook(models.Model):
    """The audit record of a deleted notebook (runs.service.deletion): who deleted which
    notebook, when, and what it was. Its rows (trace, messages, images) are gone; this row
    stays, so deleting is itself on record, and an open page or a link to the notebook can say
    it was deleted instead of "not found". It also keeps what the notebook's model calls used
    on the day it was deleted, so deleting a notebook does not give its owner's day budget
    back (runs.service.budgets)."""

    notebook_id = models.PositiveBigIntegerField(unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="deleted_notebooks",
    )
    owner_name = models.CharField(max_length=150)
    title = models.CharField(max_length=200, blank=True)
    agent = models.CharField(max_length=64, blank=True)
    deleted_by = models.CharField(max_length=150)
    deleted_at = models.DateTimeField(auto_now_add=True)
    created_at = models.DateTimeField(help_text="when the notebook was created")
    turns = models.PositiveIntegerField(default=0)
    steps = models.PositiveIntegerField(default=0)
    events = models.PositiveIntegerField(default=0)
    # a turn that was going on was stopped first (the Stop path), and whether a step waited
    stopped_turn = models.BooleanField(default=False)
    was_waiting = models.BooleanField(default=False)
    forked_from_id = models.PositiveBigIntegerField(null=True, blank=True)
    forks = models.JSONField(default=list, blank=True, help_text="ids of its forks")
    # the model calls of the deletion's UTC day: {model: [prompt tokens, completion tokens]}
    day_start = models.FloatField(default=0.0, help_text="epoch seconds")
    day_usage = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = "deleted notebook"
        ordering = ["-deleted_at", "-pk"]
        indexes = [models.Index(fields=["owner", "day_start"])]

    def __str__(self) -> str:
        return f"{self.title or f'Notebook {self.notebook_id}'} (deleted)"
