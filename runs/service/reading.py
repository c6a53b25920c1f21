"""What the entrances read of a notebook's live state: the store's views of its rows, and the text
its running steps have streamed so far (fresher in this process than in the database)."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from runs.presets import get_preset
from runs.realtime.publisher import existing_publisher
from runs.store.queries import (
    RUNNABLE,
    NotebookView,
    StepView,
    events_after,
    last_seq,
    notebook_view,
    owner_of,
    running_streams,
    summary,
)

__all__ = [
    "RUNNABLE",
    "NotebookView",
    "StepView",
    "events_after",
    "hello_summary",
    "last_seq",
    "notebook_view",
    "owner_of",
    "stream_snapshots",
]


async def stream_snapshots(task_pk: int) -> list[tuple[str, str, str]]:
    """(step_id, phase, text) of each running step's streamed text so far."""
    stored = {s[0]: s for s in await database_sync_to_async(running_streams)(task_pk)}
    publisher = existing_publisher(task_pk)
    if publisher is not None:  # fresher than the last flush when the step runs here
        stored.update({s[0]: s for s in publisher.snapshots()})
    return list(stored.values())


def hello_summary(task_pk: int) -> tuple[dict[str, Any], int]:
    """The notebook as `hello` describes it (with `branches`: its agent runs a turn's ready
    steps side by side, each approved on its own), and its last stored seq."""
    data, seq = summary(task_pk)
    preset = get_preset(data["agent"])
    data["branches"] = bool(preset and preset.runner.runs_branches)
    return data, seq
