"""`manage.py preflight`: check that the services named in the settings answer.

`make run` runs it before starting the server, so an unreachable database,
Redis or LLM server is reported in one line naming its setting, e.g.
"REDIS_URL: cannot connect to redis://127.0.0.1:6390 (Connection refused)".
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from runs.service.llm import LLMSettings, llm_settings
from runs.telemetry.config import TelemetryConfig

TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Finding:
    """One check's outcome: ok, a warning, or an error that stops `make run`."""

    level: str  # "ok" | "warning" | "error"
    message: str


def _reason(exc: BaseException) -> str:
    """A short cause, such as "Connection refused", from a driver's exception."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        if isinstance(current, OSError) and current.strerror:
            return str(current.strerror)
        reason = getattr(
            current, "reason", None
        )  # urllib's URLError wraps the OSError here
        current = (
            reason
            if isinstance(reason, BaseException)
            else current.__cause__ or current.__context__
        )
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    text = text.rsplit("failed: ", 1)[-1]  # libpq: '... port 5432 failed: <the reason>'
    text = re.sub(r"^(FATAL|ERROR):\s+", "", text)
    return text.rstrip(".")


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _database_address() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"SQLite file {db['NAME']}"
    user = f"{db.get('USER')}@" if db.get("USER") else ""
    port = f":{db.get('PORT')}" if db.get("PORT") else ""
    return f"{connection.vendor}://{user}{db.get('HOST') or 'localhost'}{port}/{db['NAME']}"


def check_database() -> Finding:
    address = _database_address()
    try:
        connection.ensure_connection()
    except Exception as exc:  # any driver error means the same thing here
        return Finding(
            "error", f"DATABASE_URL: cannot connect to {address} ({_reason(exc)})"
        )
    return Finding("ok", f"database: {address}")


def check_redis() -> Finding:
    url: str = settings.REDIS_URL
    if not url:
        return Finding(
            "ok", "channel layer: in-memory, one process (REDIS_URL not set)"
        )
    import redis

    shown = _without_password(url)
    client = redis.Redis.from_url(
        url, socket_connect_timeout=TIMEOUT_S, socket_timeout=TIMEOUT_S
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        return Finding(
            "error", f"REDIS_URL: cannot connect to {shown} ({_reason(exc)})"
        )
    finally:
        client.close()
    return Finding("ok", f"channel layer: Redis at {shown}")


def _get_models(llm: LLMSettings) -> Any:
    request = urllib.request.Request(
        f"{llm.base_url}/models", headers={"Authorization": f"Bearer {llm.api_key}"}
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return json.load(response)


def check_llm() -> Finding:
    """GET {base_url}/models: unreachable is an error, a refusal only a warning.

    Some keys may not list models, so a 401/403/404 does not stop the app.
    """
    try:
        llm = llm_settings()
    except Exception as exc:  # the demo server failed to start
        return Finding(
            "warning", f"LLM: offline demo model unavailable ({_reason(exc)})"
        )
    setting = "OPENAI_BASE_URL" if settings.OPENAI_BASE_URL else "OPENAI_API_KEY"
    url = f"{llm.base_url}/models"
    try:
        body = _get_models(llm)
    except urllib.error.HTTPError as exc:
        return Finding(
            "warning", f"{setting}: GET {url} answered {exc.code} {exc.reason}"
        )
    except (OSError, ValueError) as exc:  # URLError, timeouts, a body that is not JSON
        return Finding("error", f"{setting}: cannot connect to {url} ({_reason(exc)})")
    served = (
        [m.get("id") for m in body.get("data", []) if isinstance(m, dict)]
        if isinstance(body, dict)
        else []
    )
    if served and llm.model not in served:
        listed = ", ".join(str(m) for m in served[:5]) + (
            "…" if len(served) > 5 else ""
        )
        return Finding(
            "warning",
            f"AGENTUI_MODEL: {llm.model!r} is not among the models served ({listed})",
        )
    return Finding("ok", f"LLM: {llm.label}")


def _otlp_headers() -> dict[str, str]:
    """OTEL_EXPORTER_OTLP_(TRACES_)HEADERS as the exporter sends them (``k=v,k2=v2``, URL-encoded)."""
    raw = settings_env("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or settings_env(
        "OTEL_EXPORTER_OTLP_HEADERS"
    )
    headers = {}
    for pair in raw.split(","):
        name, _, value = pair.partition("=")
        if name.strip() and value:
            headers[unquote(name.strip())] = unquote(value.strip())
    return headers


def settings_env(name: str) -> str:
    return os.environ.get(name, "").strip()


def check_telemetry() -> Finding:
    """POST an empty OTLP request: a wrong URL or credentials stop `make run`; a collector that is
    down is only a warning (spans are then dropped and counted; steps never wait for it)."""
    config: TelemetryConfig | None = getattr(settings, "AGENTUI_TELEMETRY", None)
    if config is None:
        return Finding("ok", "telemetry: off (no OTEL_EXPORTER_OTLP_ENDPOINT)")
    request = urllib.request.Request(
        config.endpoint,
        data=b"",  # an ExportTraceServiceRequest with no spans
        headers={"Content-Type": "application/x-protobuf", **_otlp_headers()},
        method="POST",
    )
    shown = _without_password(config.endpoint)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S):
            pass
    except urllib.error.HTTPError as exc:
        hint = (
            " (is the path right? OTLP/HTTP takes traces at /v1/traces)"
            if exc.code in (404, 405)
            else " (check OTEL_EXPORTER_OTLP_HEADERS)"
            if exc.code in (401, 403)
            else ""
        )
        return Finding(
            "error",
            f"{config.setting}: POST {shown} answered {exc.code} {exc.reason}{hint}",
        )
    except OSError as exc:
        return Finding(
            "warning",
            f"{config.setting}: cannot connect to {shown} ({_reason(exc)}); "
            "runs go on, their spans are dropped and counted until it answers",
        )
    return Finding(
        "ok", f"telemetry: OTLP/HTTP to {shown} (project {config.project!r})"
    )


class Command(BaseCommand):
    help = "Check that the database, Redis, the LLM server and the trace collector from the settings answer."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-llm", action="store_true", help="skip the LLM check")
        parser.add_argument("--quiet", action="store_true", help="print only problems")

    def handle(self, *args: Any, **options: Any) -> None:
        findings = [check_database(), check_redis(), check_telemetry()]
        if not options["no_llm"]:
            findings.append(check_llm())
        for finding in findings:
            if finding.level == "ok":
                if not options["quiet"]:
                    self.stdout.write(f"ok: {finding.message}")
            elif finding.level == "warning":
                self.stderr.write(f"warning: {finding.message}")
            else:
                self.stderr.write(finding.message)
        if any(f.level == "error" for f in findings):
            sys.exit(1)
