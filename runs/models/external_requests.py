"""What other agents ask a person over agentui's own MCP server (runs.mcpserver): an approval
or a question, waiting in the person's inbox until they decide or its deadline passes.

The row is the request's whole record: who asked (the person whose API token the agent used,
the token's name and the client's own name), what, who decided what and when. The MCP call
that asked waits by reading this row, so a decision made in any server process reaches it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ExternalKind(models.TextChoices):
    APPROVAL = "approval", "approval"
    QUESTION = "question", "question"


class ExternalStatus(models.TextChoices):
    WAITING = "waiting", "waiting"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    ANSWERED = "answered", "answered"
    TIMED_OUT = "timed_out", "timed out"


class ExternalRequest(models.Model):
    """One request of an external agent to a person (runs.service.external_requests)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="external_requests",
    )
    kind = models.CharField(max_length=16, choices=ExternalKind.choices)
    status = models.CharField(
        max_length=16, choices=ExternalStatus.choices, default=ExternalStatus.WAITING
    )
    # who asked: the token's name as it was then (a revoked or deleted token keeps it here)
    token = models.ForeignKey(
        "runs.ApiToken", null=True, blank=True, on_delete=models.SET_NULL
    )
    token_name = models.CharField(max_length=100)
    client_name = models.CharField(max_length=200, blank=True)
    # what was asked, as the agent wrote it (untrusted text: shown as text)
    description = models.TextField()
    arguments = models.JSONField(null=True, blank=True)
    # a question's form: the fields checked from the agent's JSON schema ([]: a text answer)
    fields = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    deadline_at = models.DateTimeField()
    # the waiting call's heartbeat: a request whose caller is gone (its server process ended
    # with the HTTP request) leaves the inbox instead of waiting there for nobody
    alive_at = models.DateTimeField()
    # the decision
    reason = models.TextField(blank=True)
    answer = models.JSONField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_by_name = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["owner", "status"])]

    def __str__(self) -> str:
        return f"{self.kind} request {self.pk} of user {self.owner_id} ({self.status})"
