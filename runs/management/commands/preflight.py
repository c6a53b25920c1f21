"""`manage.py preflight`: check that the services named in the settings answer.

`make run` runs it before starting the server, so an unreachable database,
Redis or LLM server is reported in one line naming its setting, e.g.
"REDIS_URL: cannot connect to redis://127.0.0.1:6390 (Connection refused)".
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import unquote

from django.core.management.base import BaseCommand, CommandParser

from runs.conf import conf
from runs.service import HEALTH_TIMEOUT_S as TIMEOUT_S
from runs.service import HealthFinding as Finding
from runs.service import (
    check_database,
    check_llm,
    check_redis,
    reason_of,
    without_password,
)


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
    config = conf().telemetry
    if config is None:
        return Finding("ok", "telemetry: off (no OTEL_EXPORTER_OTLP_ENDPOINT)")
    request = urllib.request.Request(
        config.endpoint,
        data=b"",  # an ExportTraceServiceRequest with no spans
        headers={"Content-Type": "application/x-protobuf", **_otlp_headers()},
        method="POST",
    )
    shown = without_password(config.endpoint)
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
            f"{config.setting}: cannot connect to {shown} ({reason_of(exc)}); "
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
