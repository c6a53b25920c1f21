"""Per-person limits: how many runs and forks one person may start a minute, and how much they
may keep.

**Runs started** (`AGENTUI_RUNS_PER_MINUTE`, 0: no limit): every message sent (a new turn) and
every approval starts a run of steps that calls the model, paid for by the server. Each is
counted for the notebook's owner in their current minute (a fixed window that starts with the
first run after the previous one ended) in a store every server process shares: Redis when
`REDIS_URL` is set, else the database (`runs.models.RunCount`); if Redis does not answer, the
database counts meanwhile. Over the limit the action is refused with `rate_limited` and
`retry_after` (the seconds until the minute ends), having changed nothing. The count is taken under the notebook's lease, after
the action's own checks, so a refused or impossible action costs nothing.

**Forks made** (`AGENTUI_FORKS_PER_MINUTE`): a fork copies its source's whole history, so forks
are counted per person per minute the same way (`runs.models.ForkCount`, Redis key
`agentui:forks:<user id>`), after the fork point was found good and before anything is copied.

**Stored per person**: unsent images (`AGENTUI_MAX_PENDING_IMAGES`; unsent uploads older than
`AGENTUI_PENDING_IMAGE_TTL_S` are discarded and do not count), active API tokens
(`AGENTUI_MAX_API_TOKENS`) and forked notebooks (`AGENTUI_MAX_FORKS`: deleting a fork makes
room). Each is checked with the person's user row locked, so requests
made at once cannot pass the limit together; over it: `quota_exceeded`.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from runs.conf import conf
from runs.models import (
    ApiToken,
    Attachment,
    ForkCount,
    RunCount,
    Task,
)
from runs.protocol import ErrorCode, ProtocolError

logger = logging.getLogger(__name__)

WINDOW_S = 60
REDIS_TIMEOUT_S = 1.0
# after Redis failed to answer, count in the database this long before asking Redis again
REDIS_RETRY_S = 10.0
_redis_lock = threading.Lock()
_redis: dict[str, Any] = {}  # REDIS_URL -> its client, made on first use
_redis_down_until = 0.0


# --- actions taken per minute -------------------------------------------------------------


@dataclass(frozen=True)
class _PerMinute:
    """One kind of action counted per person per minute: its Redis key's middle part and its
    database table."""

    key: str
    table: type[RunCount] | type[ForkCount]


_RUNS = _PerMinute("runs", RunCount)
_FORKS = _PerMinute("forks", ForkCount)


def take_run(task_pk: int) -> None:
    """Count one run started on notebook `task_pk` for its owner; `rate_limited` if over."""
    limit = conf().runs_per_minute
    if limit <= 0:
        return
    owner_id = (
        Task.objects.filter(pk=task_pk).values_list("owner_id", flat=True).first()
    )
    if owner_id is None:
        return  # gone: the action's own checks say so
    seconds = _take(_RUNS, owner_id, limit)
    if seconds:
        raise _too_soon(
            f"You have started {limit} runs within a minute, the most one person may; "
            f"try again in {seconds} s.",
            seconds,
        )


def take_fork(user_id: int) -> None:
    """Count one fork made by `user_id`; `rate_limited` if over."""
    limit = conf().forks_per_minute
    if limit <= 0:
        return
    seconds = _take(_FORKS, user_id, limit)
    if seconds:
        raise _too_soon(
            f"You have forked {limit} notebook{_s(limit)} within a minute, the most one "
            f"person may; try again in {seconds} s.",
            seconds,
        )


def _too_soon(reason: str, seconds: int) -> ProtocolError:
    return ProtocolError(ErrorCode.RATE_LIMITED, reason, retry_after=seconds)


def _take(kind: _PerMinute, user_id: int, limit: int) -> int:
    """0 when one more `kind` by `user_id` is within the limit (and counted), else the whole
    seconds (at least 1) until the person's minute ends."""
    now = time.time()
    wait = _take_in_redis(kind, user_id, limit)
    if wait is None:
        wait = _take_in_database(kind, user_id, now, limit)
    return max(1, math.ceil(wait)) if wait > 0 else 0


def _take_in_database(kind: _PerMinute, user_id: int, now: float, limit: int) -> float:
    """0 when the action is within the limit (and counted), else the seconds until the
    person's minute ends. Each step is one conditional UPDATE, so processes counting at once
    agree."""
    mine = kind.table.objects.filter(user_id=user_id)
    current = mine.filter(window_start__gt=now - WINDOW_S)
    for _ in range(3):
        if current.filter(count__lt=limit).update(count=F("count") + 1):
            return 0.0
        ended = mine.filter(window_start__lte=now - WINDOW_S)
        if ended.update(window_start=now, count=1):
            return 0.0  # a new minute starts with this action
        row = mine.values_list("window_start", "count").first()
        if row is None:
            try:
                with transaction.atomic():
                    kind.table.objects.create(
                        user_id=user_id, window_start=now, count=1
                    )
            except IntegrityError:  # another request made the row first: count on it
                continue
            return 0.0
        started, count = row
        if started > now - WINDOW_S and count >= limit:
            return float(started + WINDOW_S - now)
        # another request changed the row between two statements: look again
    return 1.0


def _redis_client() -> Any:
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    with _redis_lock:
        client = _redis.get(url)
        if client is None:
            import redis

            client = redis.Redis.from_url(
                url,
                socket_connect_timeout=REDIS_TIMEOUT_S,
                socket_timeout=REDIS_TIMEOUT_S,
            )
            _redis[url] = client
        return client


def _take_in_redis(kind: _PerMinute, user_id: int, limit: int) -> float | None:
    """As `_take_in_database`, counted in Redis (a key that lives for the person's minute);
    None without a usable Redis."""
    global _redis_down_until
    client = _redis_client()
    if client is None or time.monotonic() < _redis_down_until:
        return None
    import redis

    key = f"agentui:{kind.key}:{user_id}"
    try:
        with client.pipeline() as pipe:  # MULTI: the three at once
            pipe.set(key, 0, ex=WINDOW_S, nx=True)  # the first action starts the minute
            pipe.incr(key)
            pipe.pttl(key)
            _, count, ttl_ms = pipe.execute()
    except redis.RedisError as exc:
        _redis_down_until = time.monotonic() + REDIS_RETRY_S
        logger.warning(
            "rate limit: Redis did not answer (%s); counting in the database for %.0f s",
            exc,
            REDIS_RETRY_S,
        )
        return None
    if int(count) <= limit:
        return 0.0
    return ttl_ms / 1000 if ttl_ms > 0 else float(WINDOW_S)


# --- things kept per person -------------------------------------------------------------------


def _lock_user(user_id: int) -> None:
    """Serialise this person's quota checks until the transaction ends."""
    get_user_model().objects.select_for_update().filter(pk=user_id).exists()


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _refuse(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.QUOTA_EXCEEDED, reason)


def hold_pending_image(user_id: int) -> None:
    """Within a transaction, before storing an upload: discard expired unsent uploads and
    refuse (`quota_exceeded`) when the person has as many unsent ones as they may."""
    limit = conf().max_pending_images
    if limit <= 0:
        return
    _lock_user(user_id)
    unsent = Attachment.objects.filter(owner_id=user_id, turn_engine_id="")
    ttl = conf().pending_image_ttl_s
    if ttl > 0:
        unsent.filter(
            created_at__lt=timezone.now() - dt.timedelta(seconds=ttl)
        ).delete()
    if unsent.count() >= limit:
        expiry = (
            f" Unsent images are discarded {_duration(ttl)} after upload."
            if ttl > 0
            else ""
        )
        raise _refuse(
            f"You have {limit} image{_s(limit)} uploaded and not sent, the most one person may keep: "
            f"send them with a message, or remove some from the composer.{expiry}"
        )


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return "an hour" if hours == 1 else f"{hours} hours"
    minutes = max(1, round(seconds / 60))
    return "a minute" if minutes == 1 else f"{minutes} minutes"


def _holds_limit(user_id: int, limit: int, kept: QuerySet[Any]) -> bool:
    """Whether the person's things `kept` are as many as `limit` (0: no limit), counted with
    their user row locked until the transaction ends."""
    if limit <= 0:
        return False
    _lock_user(user_id)
    return kept.count() >= limit


def hold_fork(user_id: int) -> None:
    """Within a transaction, before storing a fork: `quota_exceeded` when the person keeps as
    many forked notebooks as they may."""
    limit = conf().max_forks
    forks = Task.objects.filter(owner_id=user_id, fork_turn_index__isnull=False)
    if _holds_limit(user_id, limit, forks):
        raise _refuse(
            f"You have {limit} forked notebook{_s(limit)}, the most one person may keep: "
            "ask an operator to remove the ones you no longer need."
        )


def hold_api_token(user_id: int) -> None:
    """Within a transaction, before creating a token: `quota_exceeded` at the limit of active ones."""
    limit = conf().max_api_tokens
    active = ApiToken.objects.filter(user_id=user_id, revoked_at=None)
    if _holds_limit(user_id, limit, active):
        raise _refuse(
            f"You have {limit} active API token{_s(limit)}, the most one person may have: "
            "revoke one you no longer use to create another."
        )
