"""Fork a notebook (runs.store.fork) within its owner's limits, and tell their inbox when the
fork's next step waits."""

from __future__ import annotations

from django.db import transaction

from runs.models import Task
from runs.service import quotas
from runs.service.status import tell_inbox
from runs.store.fork import fork_notebook as store_fork
from runs.store.fork import fork_point


def fork_notebook(source_pk: int, step_id: str) -> Task:
    """A new notebook as `source_pk` stood right after step `step_id` (runs.store.fork); its
    waiting step shows in the owner's open inboxes at once. ForkError when it cannot be made;
    ProtocolError `quota_exceeded` when the owner keeps as many forks as they may, or
    `rate_limited` when they forked as many as they may this minute: then nothing is copied."""
    with transaction.atomic():
        source = Task.objects.get(pk=source_pk)
        quotas.hold_fork(
            source.owner_id
        )  # locks the owner's row until the fork is stored
        fork_point(source, step_id)  # a bad step is refused before it is counted
        quotas.take_fork(source.owner_id)
        fork = store_fork(source_pk, step_id)
    tell_inbox(fork.pk)
    return fork
