"""Whether the services this process needs answer: the database, the channel layer, the model.

`manage.py preflight` (run by `make run`) reports each in one line naming its setting; `/readyz`
asks the same of a running process with a short timeout (`readiness`), and adds how each enabled
MCP server is doing in this process (runs.presets.mcp.health), which never makes it unready.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import connection

from runs.conf import conf
from runs.models import McpServer
from runs.presets.mcp.health import ServerState, health_of
from runs.service.llm import LLMSettings, llm_settings

logger = logging.getLogger(__name__)

TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Finding:
    """One check's outcome: ok, a warning, or an error that stops `make run`."""

    level: str  # "ok" | "warning" | "error"
    message: str
    # the service did not answer although the level is only a warning (the offline demo model)
    down: bool = False


def reason_of(exc: BaseException) -> str:
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


def without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _database_address() -> str:
    db = settings.DATABASES["default"]
    if str(db["ENGINE"]).endswith("sqlite3"):
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
            "error", f"DATABASE_URL: cannot connect to {address} ({reason_of(exc)})"
        )
    return Finding("ok", f"database: {address}")


def check_redis(timeout: float = TIMEOUT_S) -> Finding:
    url: str = settings.REDIS_URL
    if not url:
        return Finding(
            "ok", "channel layer: in-memory, one process (REDIS_URL not set)"
        )
    import redis

    shown = without_password(url)
    client = redis.Redis.from_url(
        url, socket_connect_timeout=timeout, socket_timeout=timeout
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        return Finding(
            "error", f"REDIS_URL: cannot connect to {shown} ({reason_of(exc)})"
        )
    finally:
        client.close()
    return Finding("ok", f"channel layer: Redis at {shown}")


def _get_models(llm: LLMSettings, timeout: float) -> Any:
    request = urllib.request.Request(
        f"{llm.base_url}/models", headers={"Authorization": f"Bearer {llm.api_key}"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def check_llm(timeout: float = TIMEOUT_S) -> Finding:
    """GET {base_url}/models: unreachable is an error, a refusal only a warning.

    Some keys may not list models, so a 401/403/404 does not stop the app.
    """
    try:
        llm = llm_settings()
    except Exception as exc:  # the demo server failed to start
        return Finding(
            "warning",
            f"LLM: offline demo model unavailable ({reason_of(exc)})",
            down=True,
        )
    setting = "OPENAI_BASE_URL" if settings.OPENAI_BASE_URL else "OPENAI_API_KEY"
    url = f"{llm.base_url}/models"
    try:
        body = _get_models(llm, timeout)
    except urllib.error.HTTPError as exc:
        return Finding(
            "warning", f"{setting}: GET {url} answered {exc.code} {exc.reason}"
        )
    except (OSError, ValueError) as exc:  # URLError, timeouts, a body that is not JSON
        return Finding(
            "error", f"{setting}: cannot connect to {url} ({reason_of(exc)})"
        )
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


def _database_answers() -> Finding:
    """A query on a connection of this thread's own, closed again (a probe keeps nothing open)."""
    try:
        finding = check_database()
        if finding.level == "ok":
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        return finding
    except Exception as exc:  # noqa: BLE001 - any driver error means the same thing here
        return Finding("error", f"DATABASE_URL: {reason_of(exc)}")
    finally:
        connection.close()


def ready_timeout() -> float:
    return conf().ready_timeout_s


async def _within(name: str, check: Any, timeout: float) -> tuple[str, str]:
    """("ok" | "failed" | "timeout") for one check run in a thread of its own."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            finding: Finding = await asyncio.to_thread(check)
    except TimeoutError:
        logger.warning("readyz: %s did not answer within %g s", name, timeout)
        return name, "timeout"
    if finding.level == "error" or finding.down:
        logger.warning(
            "readyz: %s failed after %.2f s: %s",
            name,
            time.monotonic() - started,
            finding.message,
        )
        return name, "failed"
    return name, "ok"


# `/readyz` needs no login: requests arriving together share one check, and its outcome answers
# those that arrive within AGENTUI_READY_REUSE_S after it ended.


@dataclass(frozen=True)
class Readiness:
    """What `/readyz` says: each service's check, and each enabled MCP server's state here."""

    checks: dict[str, str]
    mcp: dict[str, str]

    @property
    def failed(self) -> list[str]:
        """The services that did not answer: the process is not ready."""
        return sorted(name for name, state in self.checks.items() if state != "ok")

    @property
    def degraded(self) -> list[str]:
        """The MCP servers failing here: their tools' calls fail, the rest works."""
        return sorted(
            n for n, state in self.mcp.items() if state == ServerState.FAILING
        )


@dataclass(frozen=True)
class _Checked:
    checks: dict[str, str]
    mcp_servers: list[tuple[int, str]]  # enabled, (pk, name)


@dataclass
class _SharedCheck:
    """The check this event loop's `/readyz` requests share (running, or ended at `ended`)."""

    loop: asyncio.AbstractEventLoop
    task: asyncio.Task[_Checked]
    ended: float | None = None

    def fresh(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self.loop is loop and (
            self.ended is None or time.monotonic() - self.ended < conf().ready_reuse_s
        )


_shared: _SharedCheck | None = None


async def readiness() -> Readiness:
    """Each service this process needs and whether it answered within AGENTUI_READY_TIMEOUT_S
    (all three asked at once): {"database": "ok", "channel_layer": "timeout", "model": "failed"};
    and each enabled MCP server's state in this process ({"time": "connected"}).

    The reasons go to the log, not to the answer: `/readyz` needs no login. So that anyone
    asking it often costs nothing, the requests of one moment share one check: each asks the
    database on a connection of its own, Redis on a new client and the model server with the
    server's key, and a check of a hung service holds its threads until its timeout.
    """
    global _shared
    loop = asyncio.get_running_loop()
    shared = _shared
    if shared is None or not shared.fresh(loop):
        shared = _shared = _SharedCheck(loop, loop.create_task(_check_all()))
        shared.task.add_done_callback(
            lambda _: setattr(shared, "ended", time.monotonic())
        )
    # shielded: a client that goes away does not cut the check short for the others
    checked = await asyncio.shield(shared.task)
    # the states are this process's memory, read fresh; the servers' list is shared
    return Readiness(
        dict(checked.checks),
        {name: str(health_of(pk).state) for pk, name in checked.mcp_servers},
    )


def _enabled_mcp_servers() -> list[tuple[int, str]]:
    try:
        return list(
            McpServer.objects.filter(enabled=True)
            .order_by("name")
            .values_list("pk", "name")
        )
    finally:
        connection.close()


async def _mcp_servers_within(timeout: float) -> list[tuple[int, str]]:
    """The enabled MCP servers; none when the database does not say (its check tells why)."""
    try:
        async with asyncio.timeout(timeout):
            return await asyncio.to_thread(_enabled_mcp_servers)
    except Exception:  # noqa: BLE001 - the database check reports it
        return []


async def _check_all() -> _Checked:
    limit = ready_timeout()
    database, channel_layer, model, servers = await asyncio.gather(
        _within("database", _database_answers, limit),
        _within("channel_layer", lambda: check_redis(limit), limit),
        _within("model", lambda: check_llm(limit), limit),
        _mcp_servers_within(limit),
    )
    return _Checked(dict([database, channel_layer, model]), servers)
