"""Email when a step starts waiting: a person's opt-in, rate-limited, plain and model-free.

A person turns it on on the Inbox page (with their address). At most one email per
`AGENTUI_WAIT_EMAIL_EVERY_S` reaches them, claimed with one conditional UPDATE so several server
processes send it once; the waits in between are counted and the next email says how many.
Django's email backend sends it (the console backend unless `EMAIL_BACKEND` says otherwise).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from runs.conf import conf
from runs.models import InboxSettings, Task
from runs.protocol import ErrorCode, ProtocolError
from runs.service.waiting import WaitingStep, waiting_step

TITLE_CHARS = 80


def settings_of(user: User) -> InboxSettings:
    return InboxSettings.objects.get_or_create(user=user)[0]


MAX_EMAIL_CHARS = 254


def save_settings(user: User, email_on_wait: bool, email: str) -> None:
    """Turn the 'waiting for you' email on or off, with the address it goes to (the page's
    form and the REST API's `PUT /inbox/settings` both call this)."""
    if email:
        try:
            if len(email) > MAX_EMAIL_CHARS:  # what the user's email column holds
                raise ValidationError("too long")
            validate_email(email)
        except ValidationError:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT, f"“{email[:100]}” is not an email address"
            ) from None
    if email_on_wait and not email:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, "give an email address to be told by email"
        )
    row = settings_of(user)
    row.email_on_wait = email_on_wait
    row.save(update_fields=["email_on_wait"])
    if email != user.email:
        user.email = email
        user.save(update_fields=["email"])


def _take_email_turn(user_pk: int) -> bool:
    """Claim the right to send the next email (one conditional UPDATE, safe across processes);
    False when it was sent too recently (this wait is then counted for the next one)."""
    every = conf().wait_email_every_s
    now = timezone.now()
    mine = InboxSettings.objects.filter(user_id=user_pk, email_on_wait=True)
    due = Q(last_email_at__isnull=True) | Q(
        last_email_at__lte=now - timedelta(seconds=every)
    )
    if every <= 0 or mine.filter(due).update(last_email_at=now, unsent_waits=0):
        return True
    mine.update(unsent_waits=F("unsent_waits") + 1)
    return False


def _plain(text: str) -> str:
    """One line of text fit for a plain-text email: no control characters, bounded."""
    line = "".join(ch if ch.isprintable() else " " for ch in text)
    line = " ".join(line.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


def site_url() -> str:
    url = conf().public_url
    if url:
        return url.rstrip("/")
    # where `make run` serves (HOST, PORT), as the login link's command reads it
    values = conf()
    return f"http://{values.host}:{values.port}"


@dataclass(frozen=True)
class WaitEmail:
    subject: str
    body: str
    to: str


def wait_email(step: WaitingStep, to: str, earlier: int) -> WaitEmail:
    """The email telling that `step` waits. Plain text, and nothing in it was written by a
    model (no question, input or arguments: they may carry anything) or is secret (no
    tokens or login links: the link leads to the login page when the session is gone)."""
    title = _plain(step.title) or f"Notebook {step.notebook}"
    what = {
        "tool_calls": f"{len(step.calls)} tool call(s) to approve",
        "human_input": "a question for you",
    }.get(step.kind, "a step to approve")
    site = site_url()
    lines = [
        f'Notebook "{title}" waits for you: {what}.',
        "",
        f"Open it: {site}{reverse('runs:notebook', args=[step.notebook])}",
        f"Everything that waits for you: {site}{reverse('runs:inbox')}",
    ]
    if step.deadline_at is not None:
        lines += [
            "",
            f"If nobody decides within {step.deadline.words}, it is "
            f"{'stopped' if step.deadline.action == 'stop' else 'rejected'} automatically.",
        ]
    if earlier:
        lines += ["", f"({earlier} more step(s) started waiting since the last email.)"]
    lines += [
        "",
        "You get this because you asked for it on the Inbox page; turn it off there.",
    ]
    return WaitEmail(
        subject=f'agentui: "{title}" waits for you', body="\n".join(lines), to=to
    )


def email_due(task_pk: int) -> WaitEmail | None:
    """The email telling the owner that the notebook waits, if they asked for one and the rate
    limit allows it (then it counts as sent)."""
    task = Task.objects.select_related("owner").get(pk=task_pk)
    owner = task.owner
    if not owner.email:
        return None
    prefs = InboxSettings.objects.filter(user=owner, email_on_wait=True).first()
    if prefs is None:
        return None
    earlier = prefs.unsent_waits
    if not _take_email_turn(owner.pk):
        return None
    step = waiting_step(task)
    if step is None:
        return None
    return wait_email(step, owner.email, earlier)


async def email_waiting(task_pk: int) -> bool:
    """Email the owner that the notebook waits (when due); sent from a thread of its own, so a
    slow mail server holds up neither the run nor the database calls of this process."""
    mail = await database_sync_to_async(email_due)(task_pk)
    if mail is None:
        return False
    await asyncio.to_thread(send_mail, mail.subject, mail.body, None, [mail.to])
    return True


def request_email_due(owner_pk: int, token_name: str, kind: str) -> WaitEmail | None:
    """The email telling the owner that another agent asks them (over agentui's MCP server),
    when they asked for waiting emails and the same rate limit allows it. It names the token,
    never the agent's words."""
    owner = User.objects.filter(pk=owner_pk).first()
    if owner is None or not owner.email:
        return None
    prefs = InboxSettings.objects.filter(user=owner, email_on_wait=True).first()
    if prefs is None or not _take_email_turn(owner.pk):
        return None
    what = "approval" if kind == "approval" else "an answer"
    token = _plain(token_name)
    lines = [
        f'An agent using your API token "{token}" asks you for {what}.',
        "",
        f"Decide in your inbox: {site_url()}{reverse('runs:inbox')}",
        "",
        "You get this because you asked for it on the Inbox page; turn it off there.",
    ]
    return WaitEmail(
        subject=f'agentui: an agent ("{token}") waits for you',
        body="\n".join(lines),
        to=owner.email,
    )


async def email_request(owner_pk: int, token_name: str, kind: str) -> bool:
    """Email the owner that another agent's request waits (when due), from a thread."""
    mail = await database_sync_to_async(request_email_due)(owner_pk, token_name, kind)
    if mail is None:
        return False
    await asyncio.to_thread(send_mail, mail.subject, mail.body, None, [mail.to])
    return True
