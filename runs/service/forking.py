"""Fork a notebook (runs.store.fork), and tell its owner's inbox when the fork's next step waits."""

from __future__ import annotations

from runs.models import Task
from runs.service.status import tell_inbox
from runs.store.fork import fork_notebook as store_fork


def fork_notebook(source_pk: int, step_id: str) -> Task:
    """A new notebook as `source_pk` stood right after step `step_id` (runs.store.fork); its
    waiting step shows in the owner's open inboxes at once. ForkError when it cannot be made."""
    fork = store_fork(source_pk, step_id)
    tell_inbox(fork.pk)
    return fork
