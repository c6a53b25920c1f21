"""Whether and where spans are exported, read from the standard OpenTelemetry variables.

Export is off unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL, e.g.
``http://127.0.0.1:6006/v1/traces``) or `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL; ``/v1/traces``
is added) is set, and `OTEL_SDK_DISABLED=true` turns it off again. Plain Python on purpose:
settings.py calls `from_environ` so a malformed value stops every command with one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

TRACES_PATH = "/v1/traces"
SUPPORTED_PROTOCOL = "http/protobuf"


class TelemetryConfigError(ValueError):
    """A malformed setting; the message starts with the variable's name."""


@dataclass(frozen=True)
class TelemetryConfig:
    """Where spans go and how much may wait for the collector."""

    endpoint: str  # the full OTLP/HTTP traces URL
    setting: str  # the variable the endpoint came from, for messages
    project: str = "agentui"  # Phoenix's project (openinference.project.name)
    service_name: str = "agentui"
    max_queue_size: int = 2048  # spans waiting for export; more are dropped and counted
    max_export_batch_size: int = 512
    schedule_delay_ms: int = 1000
    export_timeout_s: float = 10.0  # one export request, retries included


def _text(env: Mapping[str, str], name: str) -> str:
    return env.get(name, "").strip()


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = _text(env, name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise TelemetryConfigError(f"{name}: expected a whole number > 0, got {raw!r}")
    return value


def _positive_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _text(env, name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise TelemetryConfigError(f"{name}: expected seconds (> 0), got {raw!r}")
    return value


def _checked_url(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TelemetryConfigError(
            f"{name}: expected an http:// or https:// URL, got {url!r}"
        )
    try:
        _ = parts.port
    except ValueError as exc:
        raise TelemetryConfigError(f"{name}: bad port ({exc})") from None
    return url


def from_environ(
    env: Mapping[str, str], *, project: str = "agentui"
) -> TelemetryConfig | None:
    """The export settings from the OTEL_* variables, or None when export is off;
    TelemetryConfigError if malformed. `project` is AGENTUI_OTEL_PROJECT (runs.conf)."""
    disabled = _text(env, "OTEL_SDK_DISABLED").lower()
    if disabled not in ("", "true", "false"):
        raise TelemetryConfigError(
            f"OTEL_SDK_DISABLED: expected true or false, got {disabled!r}"
        )
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = _text(env, name)
        if protocol and protocol != SUPPORTED_PROTOCOL:
            raise TelemetryConfigError(
                f"{name}: agentui exports over {SUPPORTED_PROTOCOL} only, got {protocol!r}"
            )
    if traces := _text(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        setting = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        endpoint = _checked_url(setting, traces)
    elif base := _text(env, "OTEL_EXPORTER_OTLP_ENDPOINT"):
        setting = "OTEL_EXPORTER_OTLP_ENDPOINT"
        endpoint = _checked_url(setting, base).rstrip("/") + TRACES_PATH
    else:
        return None
    max_queue = _positive_int(env, "OTEL_BSP_MAX_QUEUE_SIZE", 2048)
    batch = _positive_int(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", min(512, max_queue))
    if batch > max_queue:
        raise TelemetryConfigError(
            f"OTEL_BSP_MAX_EXPORT_BATCH_SIZE: {batch} is more than "
            f"OTEL_BSP_MAX_QUEUE_SIZE ({max_queue})"
        )
    timeout = _positive_seconds(
        env,
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        _positive_seconds(env, "OTEL_EXPORTER_OTLP_TIMEOUT", 10.0),
    )
    config = TelemetryConfig(
        endpoint=endpoint,
        setting=setting,
        project=project,
        service_name=_text(env, "OTEL_SERVICE_NAME") or "agentui",
        max_queue_size=max_queue,
        max_export_batch_size=batch,
        schedule_delay_ms=_positive_int(env, "OTEL_BSP_SCHEDULE_DELAY", 1000),
        export_timeout_s=timeout,
    )
    return None if disabled == "true" else config
