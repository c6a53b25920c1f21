"""The Model Context Protocol servers an admin configured (runs.presets.mcp)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models


class McpTransport(models.TextChoices):
    STDIO = "stdio", "Command (stdio)"
    HTTP = "http", "URL (streamable HTTP)"


class McpLogLevel(models.TextChoices):
    """MCP's log levels (RFC 5424's), least severe first."""

    DEBUG = "debug", "debug"
    INFO = "info", "info"
    NOTICE = "notice", "notice"
    WARNING = "warning", "warning"
    ERROR = "error", "error"
    CRITICAL = "critical", "critical"
    ALERT = "alert", "alert"
    EMERGENCY = "emergency", "emergency"


class McpServer(models.Model):
    """A Model Context Protocol server an admin configured; its tools can be picked per notebook.

    `tools` is the server's tool listing as last fetched (runs.presets.mcp.listing), already
    checked: names fit the OpenAI function-name pattern, descriptions and schemas are capped.
    Notebooks offer these to the model without starting the server; it starts on the first call.
    A listed tool keeps its `title` and behaviour `hints`; the hints are the server's word, so
    they skip approval only where the admin marked the server `trusted` and chose
    `read_only_unasked` (runs.service.policies.trusted).
    """

    name = models.CharField(
        max_length=20,
        unique=True,
        validators=[
            RegexValidator(
                r"^[a-z][a-z0-9_]{0,19}$",
                "a lower-case letter, then lower-case letters, digits or _",
            )
        ],
        help_text="Short name, the prefix of its tools' names (`time` gives `time__get_current_time`): "
        "a lower-case letter, then letters, digits or _",
    )
    description = models.CharField(max_length=300, blank=True)
    transport = models.CharField(
        max_length=8, choices=McpTransport.choices, default=McpTransport.STDIO
    )
    command = models.CharField(
        max_length=500, blank=True, help_text="stdio: the program to run"
    )
    args = models.JSONField(
        default=list,
        blank=True,
        help_text='stdio: its arguments, a JSON list ["--flag", "value"]',
    )
    env = models.JSONField(
        default=dict,
        blank=True,
        help_text='stdio: extra environment variables, a JSON object {"NAME": "value"}',
    )
    url = models.URLField(
        max_length=500, blank=True, help_text="streamable HTTP: the endpoint URL"
    )
    headers = models.JSONField(
        default=dict,
        blank=True,
        help_text='streamable HTTP: request headers, a JSON object {"Authorization": "Bearer …"}',
    )
    enabled = models.BooleanField(default=True)
    everyone = models.BooleanField(
        default=False,
        help_text="Every user may pick its tools (else only those granted)",
    )
    users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="mcp_servers"
    )
    groups = models.ManyToManyField(
        "auth.Group", blank=True, related_name="mcp_servers"
    )
    trusted = models.BooleanField(
        default=False,
        help_text="You trust what this server says of its tools (readOnlyHint, destructiveHint): "
        "only then may its hints change what asks before running",
    )
    read_only_unasked = models.BooleanField(
        "read-only tools run without asking",
        default=False,
        help_text="Where tool calls wait for approval (tools mode), its tools marked readOnlyHint (and not "
        "destructiveHint) run without asking, unless a rule asks; needs trusted",
    )
    idle_timeout_s = models.FloatField(
        "idle timeout (s)",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text="A call ends when the server has said nothing (no answer, progress or log "
        "message) for this long; blank: AGENTUI_MCP_TIMEOUT_S",
    )
    max_call_s = models.FloatField(
        "hard maximum (s)",
        null=True,
        blank=True,
        validators=[MinValueValidator(0.1)],
        help_text="A call ends after this long even while the server reports progress (time a "
        "question to the person waits is not counted); blank: AGENTUI_MCP_MAX_CALL_S",
    )
    log_level = models.CharField(
        max_length=10,
        choices=McpLogLevel.choices,
        default=McpLogLevel.WARNING,
        help_text="The server is asked to send log messages of this level and above "
        "(logging/setLevel); they show on the call's card and in agentui's log",
    )
    tools = models.JSONField(default=list, blank=True, editable=False)
    tools_note = models.TextField(
        blank=True, default="", editable=False, help_text="what the last fetch said"
    )
    tools_fetched_at = models.DateTimeField(null=True, blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "MCP server"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
