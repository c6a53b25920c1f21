"""Approval rules for tool calls (runs.service.policies)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .notebooks import Task


class PolicyDecision(models.TextChoices):
    """What an approval policy decides for a matching tool call (runs.service.policies)."""

    ASK = "ask", "Always ask"
    ASK_ONCE = "ask_once", "Ask once per notebook"
    ALLOW = "allow", "Never ask (allowed)"
    REFUSE = "refuse", "Never allowed (refused)"


class ToolPolicy(models.Model):
    """An approval rule for the calls of one tool: who it applies to, what it decides, and when
    the call's arguments match (`condition`, see runs/service/policies/match.py).

    Its scope is the one field set among `notebook` (this notebook), `owner` (all of a person's
    notebooks), `preset` and `group` (an admin's defaults); none of them: everyone's default.
    Revoking keeps the row, so the audit's "approved by rule #3" still names what rule 3 was.
    """

    tool = models.CharField(
        max_length=128, help_text="the tool's name, as the model calls it"
    )
    decision = models.CharField(max_length=16, choices=PolicyDecision.choices)
    condition = models.CharField(
        max_length=500,
        blank=True,
        help_text="optional: path=value clauses joined by ' and ' "
        "(e.g. database=sample); the rule applies only to calls whose arguments match",
    )
    reason = models.CharField(
        max_length=500, blank=True, help_text="for a refusal: what the model is told"
    )
    notebook = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.CASCADE, related_name="policies"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tool_policies",
    )
    preset = models.CharField(
        max_length=64, blank=True, help_text="admin default for notebooks of this agent"
    )
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tool_policies",
        help_text="admin default for the notebooks of this group's members",
    )
    set_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=150, blank=True)

    class Meta:
        verbose_name = "tool approval policy"
        verbose_name_plural = "tool approval policies"
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["tool", "revoked_at"])]

    def __str__(self) -> str:
        return f"rule #{self.pk}: {self.get_decision_display()} {self.tool}"
