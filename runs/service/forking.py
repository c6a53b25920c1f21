"""Fork a notebook (runs.store.fork) within its owner's limits, and tell their inbox when the
fork's next step waits."""

from __future__ import annotations

from django.db import transaction

from runs.models import Task
from runs.service import quotas
from runs.service.status import tell_inbox
from runs.store.fork import fork_at, locked_fork_point


def fork_notebook(source_pk: int, step_id: str) -> Task:
    """A new notebook as `source_pk` stood right after step `step_id` (runs.store.fork); its
    waiting step shows in the owner's open inboxes at once. ForkError when it cannot be made;
    ProtocolError `quota_exceeded` when the owner keeps as many forks as they may, or
    `rate_limited` when they forked as many as they may this minute: then nothing is copied."""
    with transaction.atomic():
        owner_id = Task.objects.values_list("owner_id", flat=True).get(pk=source_pk)
        quotas.hold_fork(owner_id)  # locks the owner's row until the fork is stored
        # The point is found once, with the source locked: it cannot change before the copy,
        # and a bad step is refused before it is counted.
        source, point = locked_fork_point(source_pk, step_id)
        quotas.take_fork(owner_id)
        fork = fork_at(source, point)
    tell_inbox(fork.pk)
    return fork
