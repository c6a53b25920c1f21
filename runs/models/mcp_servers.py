"""The Model Context Protocol servers an admin configured (runs.presets.mcp)."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from pydantic import FileUrl, TypeAdapter
from pydantic import ValidationError as PydanticError

MAX_ROOTS = 50
MAX_ROOT_CHARS = 1000
_FILE_URL = TypeAdapter(FileUrl)


def root_uri(line: str) -> str:
    """One root as `roots/list` sends it: an absolute path as a `file://` URI, a `file://` URI
    as the SDK normalises it; ValueError saying what is wrong otherwise.

    Only `file://`: the protocol (2025-11-25) says a root's URI is one, and the SDK refuses any
    other on both sides, so an `https://` root would break the whole answer.
    """
    text = line.strip()
    if len(text) > MAX_ROOT_CHARS:
        raise ValueError(f"at most {MAX_ROOT_CHARS} characters")
    if "\x00" in text:
        raise ValueError("a NUL character")
    if text.startswith("/"):
        text = PurePosixPath(text).as_uri()
    elif "://" not in text and not text.lower().startswith("file:"):
        raise ValueError(
            "a path must be absolute (start with /), or give a file:// URI"
        )
    elif not text.lower().startswith("file:"):
        scheme = text.split(":", 1)[0]
        raise ValueError(
            f"{scheme}: is not a root MCP allows: give an absolute path or a file:// URI"
        )
    try:
        return str(_FILE_URL.validate_python(text))
    except PydanticError:
        raise ValueError("not a valid file:// URI") from None


def root_uris(text: str) -> list[str]:
    """The roots of an admin's text, one path or URI per line (blank lines skipped), without
    repeats; ValidationError naming each line that is wrong."""
    uris: list[str] = []
    problems: list[str] = []
    lines = [line for line in text.splitlines() if line.strip()]
    for number, line in enumerate(lines, start=1):
        try:
            uri = root_uri(line)
        except ValueError as exc:
            problems.append(f"root {number} ({line.strip()[:80]!r}): {exc}")
            continue
        if uri not in uris:
            uris.append(uri)
    if len(uris) > MAX_ROOTS:
        problems.append(f"at most {MAX_ROOTS} roots")
    if problems:
        raise ValidationError(problems)
    return uris


def validate_roots(text: str) -> None:
    root_uris(text)


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
    roots = models.TextField(
        blank=True,
        default="",
        validators=[validate_roots],
        help_text="The roots the server is told it may work in (roots/list), one per line: "
        "an absolute path (/srv/repo, sent as file:///srv/repo) or a file:// URI; none: an "
        "empty list. A running session is told of a change (notifications/roots/list_changed)",
    )
    tools = models.JSONField(default=list, blank=True, editable=False)
    tools_left_out = models.JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="the listed tools the last fetch refused, each with why",
    )
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

    def root_uris(self) -> list[str]:
        """Its roots as URIs; a stored line that is not a root (set around the form) is skipped."""
        uris: list[str] = []
        for line in self.roots.splitlines():
            try:
                uri = root_uri(line) if line.strip() else ""
            except ValueError:
                continue
            if uri and uri not in uris:
                uris.append(uri)
        return uris[:MAX_ROOTS]
