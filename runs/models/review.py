"""Reviewers' annotations on a notebook's steps, tool calls and answers, and corrected answers
(runs.traces)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .notebooks import Task, Turn


class AnnotationTarget(models.TextChoices):
    STEP = "step", "Step"
    CALL = "call", "Tool call"
    ANSWER = "answer", "Answer"


class Annotation(models.Model):
    """A reviewer's comment and thumbs up/down on a step, a tool call or a turn's answer."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="annotations")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="annotations"
    )
    target = models.CharField(max_length=8, choices=AnnotationTarget.choices)
    turn_id = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="the turn's engine id (answers)",
    )
    step_id = models.CharField(max_length=64, blank=True, default="")
    tool_id = models.CharField(max_length=128, blank=True, default="")
    rating = models.SmallIntegerField(
        default=0, help_text="1 thumbs up, -1 thumbs down, 0 none"
    )
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.target} annotation on notebook {self.task_id}"


class CorrectedAnswer(models.Model):
    """One version of the answer a reviewer says a turn should have given, beside the agent's.

    Never written over: an edit is a new row, so every version is kept with who and when,
    and the newest is the one shown (and the expected answer of a dataset example)."""

    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="corrected_answers"
    )
    turn = models.ForeignKey(
        Turn, on_delete=models.CASCADE, related_name="corrected_answers"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="corrected_answers",
    )
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "turn", "created_at", "pk"]
        indexes = [models.Index(fields=["turn", "-created_at"])]

    def __str__(self) -> str:
        return f"corrected answer of turn {self.turn_id} (notebook {self.task_id})"
