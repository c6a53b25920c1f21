"""Reading datasets: lists, a version's examples by page, what changed between two versions, and
the JSONL export whose lines are Langfuse and LangSmith dataset items.

Reads only; the writes and who may are runs.service.datasets. An export line:

    {"id": key, "input": {...}, "expected_output": {"answer", "trajectory", "must_not_call"},
     "metadata": {...}}

(docs/datasets.md maps it onto each tool's fields.)
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import Count, OuterRef, QuerySet, Subquery

from runs.models import Dataset, DatasetVersion, Example

EXPORT_CHUNK = 500


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat()


def with_latest(datasets: QuerySet[Dataset]) -> QuerySet[Dataset]:
    """`datasets` with their newest version's number and example count (`latest_number`,
    `latest_count`) and how many versions they have, in one query."""
    newest = DatasetVersion.objects.filter(dataset=OuterRef("pk")).order_by("-number")
    return (
        datasets.select_related("owner")
        .annotate(
            latest_number=Subquery(newest.values("number")[:1]),
            latest_count=Subquery(newest.values("example_count")[:1]),
            version_count=Count("versions"),
        )
        .order_by("-created_at", "-pk")
    )


def dataset_json(dataset: Dataset) -> dict[str, Any]:
    """A dataset as lists show it (annotated by `with_latest`, or read here)."""
    number = getattr(dataset, "latest_number", None)
    count = getattr(dataset, "latest_count", None)
    if not hasattr(dataset, "latest_number"):
        latest = dataset.versions.order_by("-number").first()
        number = latest.number if latest else None
        count = latest.example_count if latest else 0
    return {
        "id": dataset.pk,
        "name": dataset.name,
        "description": dataset.description,
        "owner": dataset.owner.get_username(),
        "created_at": _iso(dataset.created_at),
        "latest_version": number,
        "example_count": count or 0,
        "versions": getattr(dataset, "version_count", None) or dataset.versions.count(),
    }


def version_json(version: DatasetVersion) -> dict[str, Any]:
    """One version: its number, who made it, when and why, and what changed from the one before."""
    return {
        "number": version.number,
        "created_by": version.created_by.get_username() if version.created_by else None,
        "created_at": _iso(version.created_at),
        "note": version.note,
        "example_count": version.example_count,
        "added": version.added,
        "removed": version.removed,
        "changed": version.changed,
    }


def versions_of(dataset: Dataset) -> list[dict[str, Any]]:
    """Every version of `dataset`, newest first."""
    rows = dataset.versions.select_related("created_by").order_by("-number")
    return [version_json(v) for v in rows]


def version_of(dataset: Dataset, number: int | None) -> DatasetVersion | None:
    """Version `number` of `dataset` (None: the newest); None when there is no such version."""
    rows = dataset.versions.select_related("created_by")
    if number is None:
        return rows.order_by("-number").first()
    return rows.filter(number=number).first()


def example_json(example: Example) -> dict[str, Any]:
    """An example as stored: its input, expected answer and trajectory, metadata."""
    return {
        "id": example.key,
        "position": example.position,
        "input": example.input,
        "expected_output": example.expected_output,
        "expected_trajectory": example.expected_trajectory,
        "metadata": example.metadata,
        "source_notebook": example.source_notebook,
    }


def examples_of(version: DatasetVersion) -> QuerySet[Example]:
    """The examples of `version` in their order (page it: a version may hold thousands)."""
    return version.examples.order_by("position")


def version_diff(old: DatasetVersion, new: DatasetVersion) -> dict[str, Any]:
    """What changed from `old` to `new`: the keys added, removed and changed (by content), and
    how many stayed the same; two queries of keys and digests, no example read whole."""
    before = dict(old.examples.values_list("key", "digest"))
    after = dict(new.examples.values_list("key", "digest"))
    order = list(new.examples.order_by("position").values_list("key", flat=True))
    removed = [
        k
        for k in old.examples.order_by("position").values_list("key", flat=True)
        if k not in after
    ]
    added = [k for k in order if k not in before]
    changed = [k for k in order if k in before and before[k] != after[k]]
    return {
        "from_version": old.number,
        "to_version": new.number,
        "added": added,
        "removed": removed,
        "changed": changed,
        "same": len(after) - len(added) - len(changed),
    }


def export_item(row: dict[str, Any]) -> dict[str, Any]:
    """One example as a dataset item of Langfuse (`input`, `expected_output`, `metadata`, `id`)
    or LangSmith (`inputs` ← input, `outputs` ← expected_output, `metadata`)."""
    trajectory = row["expected_trajectory"] or {}
    return {
        "id": row["key"],
        "input": row["input"],
        "expected_output": {
            "answer": row["expected_output"],
            "trajectory": trajectory.get("calls", []),
            "must_not_call": trajectory.get("must_not_call", []),
        },
        "metadata": row["metadata"],
    }


# the columns an export item is made of (`export_item`)
EXPORTED = ("key", "input", "expected_output", "expected_trajectory", "metadata")


def _export_chunk(version_pk: int, after: int) -> tuple[int, str]:
    """The JSONL of the next EXPORT_CHUNK examples after position `after`, and the last
    position in it (0: none left)."""
    rows = list(
        Example.objects.filter(version_id=version_pk, position__gt=after)
        .order_by("position")
        .values("position", *EXPORTED)[:EXPORT_CHUNK]
    )
    text = "".join(
        json.dumps(export_item(row), ensure_ascii=False) + "\n" for row in rows
    )
    return (rows[-1]["position"] if rows else 0), text


async def export_stream(version: DatasetVersion) -> AsyncIterator[str]:
    """`version` as JSONL for a streamed response: a chunk of examples at a time, each read by
    position (a large version is never held whole, and the event loop never waits on a query)."""
    after = 0
    while True:
        after, text = await sync_to_async(_export_chunk)(version.pk, after)
        if not after:
            return
        yield text


def export_lines(version: DatasetVersion) -> Iterator[str]:
    """`version` as JSONL, one example a line, read in chunks (a large version is never held
    whole)."""
    rows = (
        version.examples.order_by("position")
        .values(*EXPORTED)
        .iterator(chunk_size=EXPORT_CHUNK)
    )
    for row in rows:
        yield json.dumps(export_item(row), ensure_ascii=False) + "\n"


def export_file_name(dataset: Dataset, version: DatasetVersion) -> str:
    """A file name for the export: the dataset's name in safe characters and the version."""
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in dataset.name)
    return f"{stem.strip('-')[:60] or 'dataset'}-v{version.number}.jsonl"
