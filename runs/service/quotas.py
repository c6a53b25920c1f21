"""Per-person limits: how many runs one person may start a minute, and how much they may keep.

**Runs started** (`AGENTUI_RUNS_PER_MINUTE`, 0: no limit): every message sent (a new turn) and
every approval starts a run of steps that calls the model, paid for by the server. Each is
counted for the notebook's owner in their current minute (a fixed window that starts with the
first run after the previous one ended) in a store every server process shares: Redis when
`REDIS_URL` is set, else the database (`runs.models.RunCount`); if Redis does not answer, the
database counts meanwhile. Over the limit the action is refused with `rate_limited` and
`retry_after` (the seconds until the minute ends), having changed nothing. The count is taken under the notebook's lease, after
the action's own checks, so a refused or impossible action costs nothing.

**Stored per person**: unsent images (`AGENTUI_MAX_PENDING_IMAGES`; unsent uploads older than
`AGENTUI_PENDING_IMAGE_TTL_S` are discarded and do not count) and active API tokens
(`AGENTUI_MAX_API_TOKENS`). Each is checked with the person's user row locked, so requests
made at once cannot pass the limit together; over it: `quota_exceeded`.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from runs.conf import conf
from runs.models import ApiToken, Attachment, RunCount, Task
from runs.protocol import ErrorCode, ProtocolError

logger = logging.getLogger(__name__)

WINDOW_S = 60
REDIS_TIMEOUT_S = 1.0
# after Redis failed to answer, count in the database this long before asking Redis again
REDIS_RETRY_S = 10.0
_redis_lock = threading.Lock()
_redis: dict[str, Any] = {}  # REDIS_URL -> its client, made on first use
_redis_down_until = 0.0


# --- runs started per minute ----------------------------------------------------------------


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
    now = time.time()
    wait = _take_in_redis(owner_id, limit)
    if wait is None:
        wait = _take_in_database(owner_id, now, limit)
    if wait > 0:
        seconds = max(1, math.ceil(wait))
        raise ProtocolError(
            ErrorCode.RATE_LIMITED,
            f"You have started {limit} runs within a minute, the most one person may; "
            f"try again in {seconds} s.",
            retry_after=seconds,
        )


def _take_in_database(user_id: int, now: float, limit: int) -> float:
    """0 when the run is within the limit (and counted), else the seconds until the person's
    minute ends. Each step is one conditional UPDATE, so processes counting at once agree."""
    mine = RunCount.objects.filter(user_id=user_id)
    current = mine.filter(window_start__gt=now - WINDOW_S)
    for _ in range(3):
        if current.filter(count__lt=limit).update(count=F("count") + 1):
            return 0.0
        ended = mine.filter(window_start__lte=now - WINDOW_S)
        if ended.update(window_start=now, count=1):
            return 0.0  # a new minute starts with this run
        row = mine.values_list("window_start", "count").first()
        if row is None:
            try:
                with transaction.atomic():
                    RunCount.objects.create(user_id=user_id, window_start=now, count=1)
            except IntegrityError:  # another request made the row first: count on it
                continue
            return 0.0
        started, count = row
        if started > now - WINDOW_S and count >= limit:
            return started + WINDOW_S - now
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


def _take_in_redis(user_id: int, limit: int) -> float | None:
    """As `_take_in_database`, counted in Redis (a key that lives for the person's minute);
    None without a usable Redis."""
    global _redis_down_until
    client = _redis_client()
    if client is None or time.monotonic() < _redis_down_until:
        return None
    import redis

    key = f"agentui:runs:{user_id}"
    try:
        with client.pipeline() as pipe:  # MULTI: the three at once
            pipe.set(key, 0, ex=WINDOW_S, nx=True)  # the first run starts the minute
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


def hold_api_token(user_id: int) -> None:
    """Within a transaction, before creating a token: `quota_exceeded` at the limit of active ones."""
    limit = conf().max_api_tokens
    if limit <= 0:
        return
    _lock_user(user_id)
    active = ApiToken.objects.filter(user_id=user_id, revoked_at=None).count()
    if active >= limit:
        raise _refuse(
            f"You have {limit} active API token{_s(limit)}, the most one person may have: "
            "revoke one you no longer use to create another."
        )
