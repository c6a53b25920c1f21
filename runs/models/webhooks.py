"""The URLs that hear about their owners' notebooks, and what was sent to them
(runs.service.webhooks)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .notebooks import Task


class WebhookEvent(models.TextChoices):
    """What a webhook may be told of: a notebook's status changing into one of these, or a
    request of another agent starting to wait."""

    WAITING = "step.waiting", "A step waits for a person"
    FINISHED = "turn.finished", "A turn finished"
    FAILED = "turn.failed", "A step failed"
    STOPPED = "turn.stopped", "A turn was stopped or interrupted"
    # not a notebook's: another agent asks over agentui's MCP server (runs.mcpserver)
    REQUEST = "request.waiting", "An agent asks for approval or an answer"


class Webhook(models.Model):
    """A URL that hears about its owner's notebooks (runs.service.webhooks), signed with `secret`."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhooks"
    )
    url = models.URLField(max_length=500)
    events = models.JSONField(default=list, help_text="WebhookEvent values")
    secret = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner", "created_at", "pk"]

    def __str__(self) -> str:
        return self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"
    # its host resolved to an address a webhook may not reach: nothing sent, never retried
    REFUSED = "refused", "Refused"


class WebhookDelivery(models.Model):
    """One event sent (or being sent) to one webhook: the delivery log its owner sees."""

    webhook = models.ForeignKey(
        Webhook, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    task = models.ForeignKey(Task, on_delete=models.SET_NULL, null=True, blank=True)
    payload = models.JSONField()
    status = models.CharField(
        max_length=12, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # a process sending it holds it until then (several processes never send one twice at once)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event} → {self.webhook_id} ({self.status})"
