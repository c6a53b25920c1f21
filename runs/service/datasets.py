"""Datasets: examples made from notebooks people reviewed, or imported, kept in immutable versions.

Who may: a dataset's owner changes it; their group reviewers (runs.service.reviewers) read it,
as they read the owner's traces. Every change (examples added, edited or removed) makes the
next version in one transaction: the previous version's examples copied with the change, the
counts of what changed stored with it, nothing written to an earlier version. A change that
changes nothing makes no version. The read models (lists, pages, diffs, the JSONL export) are
runs.traces.datasets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet

from runs.models import Dataset, DatasetVersion, Example, Task
from runs.protocol import ErrorCode, ProtocolError
from runs.protocol.checks import storable_problem
from runs.service.corrected_answers import may_correct
from runs.service.dataset_import import (
    MAX_EXAMPLES,
    NewExample,
    checked_example,
    read_examples,
)
from runs.service.reviewers import may_review, reviewees
from runs.service.sources import demo_examples_for

MAX_NAME_CHARS = 120
MAX_DESCRIPTION_CHARS = 2_000
MAX_NOTE_CHARS = 300
MAX_NOTEBOOKS_AT_ONCE = 200
COPY_BATCH = 1_000

_NOT_FOUND = "No such dataset."


def notebook_key(task_pk: int) -> str:
    """The key of the example made from notebook `task_pk`: adding it again replaces it."""
    return f"notebook-{task_pk}"


# --- who may ---------------------------------------------------------------------------------


def readable_datasets(user_pk: int) -> QuerySet[Dataset]:
    """The datasets `user_pk` may read: their own and their reviewees' (group reviewers)."""
    return Dataset.objects.filter(
        Q(owner_id=user_pk) | Q(owner_id__in=reviewees(user_pk))
    )


def readable_dataset(user_pk: int, pk: int) -> Dataset:
    """Dataset `pk` if `user_pk` may read it; ProtocolError `not_found` otherwise (as for one
    that does not exist)."""
    dataset = Dataset.objects.select_related("owner").filter(pk=pk).first()
    if dataset is None or not (
        dataset.owner_id == user_pk or may_review(user_pk, dataset.owner_id)
    ):
        raise ProtocolError(ErrorCode.NOT_FOUND, _NOT_FOUND)
    return dataset


def own_dataset(user_pk: int, pk: int) -> Dataset:
    """Dataset `pk` if `user_pk` may change it (its owner); `not_found` for one they may not
    read, `not_allowed` for one they only read."""
    dataset = readable_dataset(user_pk, pk)
    if dataset.owner_id != user_pk:
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            "Only the dataset's owner changes it; you may read it.",
        )
    return dataset


# --- checks ----------------------------------------------------------------------------------


def _text(what: str, text: str, most: int, *, required: bool = False) -> str:
    text = text.strip()
    if required and not text:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"Give the dataset a {what}.")
    if len(text) > most:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"The {what} has {len(text):,} characters; at most {most:,} are kept.",
        )
    problem = storable_problem(text)
    if problem is not None:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"The {what} {problem}.")
    return text


# --- versions --------------------------------------------------------------------------------


def latest_version(dataset: Dataset) -> DatasetVersion | None:
    return dataset.versions.order_by("-number").first()


def _copy(version: DatasetVersion, rows: Iterable[dict[str, Any] | NewExample]) -> int:
    """Store `rows` (an earlier version's example values, or new examples) as the examples of
    `version`, in order, in batches; returns how many."""
    batch: list[Example] = []
    position = 0
    for row in rows:
        position += 1
        if isinstance(row, NewExample):
            fields: dict[str, Any] = {
                "key": row.key,
                "digest": row.digest,
                "input": row.input,
                "expected_output": row.expected_output,
                "expected_trajectory": row.expected_trajectory,
                "metadata": row.metadata,
                "source_notebook": row.source_notebook,
            }
        else:
            fields = row
        batch.append(Example(version=version, position=position, **fields))
        if len(batch) >= COPY_BATCH:
            Example.objects.bulk_create(batch)
            batch = []
    if batch:
        Example.objects.bulk_create(batch)
    return position


_FIELDS = (
    "key",
    "digest",
    "input",
    "expected_output",
    "expected_trajectory",
    "metadata",
    "source_notebook",
)


def _new_version(
    dataset: Dataset,
    user: User,
    note: str,
    *,
    upsert: Sequence[NewExample] = (),
    remove: Iterable[str] = (),
) -> DatasetVersion:
    """The next version of `dataset`: the latest's examples without those keyed in `remove`,
    each of `upsert` in place of the one with its key (else added at the end). Nothing changed:
    no version, the latest returned. ProtocolError names a removed key that is not there or a
    version that would hold more than MAX_EXAMPLES."""
    note = _text("note", note, MAX_NOTE_CHARS)
    with transaction.atomic():
        # one version at a time per dataset: two changes at once are ordered, not interleaved
        Dataset.objects.select_for_update().filter(pk=dataset.pk).exists()
        latest = latest_version(dataset)
        old_keys: dict[str, str] = (
            dict(latest.examples.values_list("key", "digest")) if latest else {}
        )
        gone = set(remove)
        missing = sorted(gone - old_keys.keys())
        if missing:
            raise ProtocolError(
                ErrorCode.NOT_FOUND,
                f"The dataset's latest version has no example {missing[0]!r}.",
            )
        new = {example.key: example for example in upsert}
        changed = sum(
            1 for k, e in new.items() if k in old_keys and old_keys[k] != e.digest
        )
        added = [e for k, e in new.items() if k not in old_keys]
        count = len(old_keys) - len(gone) + len(added)
        if latest is not None and not (changed or added or gone):
            return latest
        if count > MAX_EXAMPLES:
            raise ProtocolError(
                ErrorCode.QUOTA_EXCEEDED,
                f"The dataset would hold {count:,} examples; at most {MAX_EXAMPLES:,}.",
            )
        version = DatasetVersion.objects.create(
            dataset=dataset,
            number=(latest.number + 1) if latest else 1,
            created_by=user,
            note=note,
            example_count=count,
            added=len(added),
            removed=len(gone),
            changed=changed,
        )

        def rows() -> Iterable[dict[str, Any] | NewExample]:
            if latest is not None:
                kept = latest.examples.order_by("position").values(*_FIELDS)
                for row in kept.iterator(chunk_size=COPY_BATCH):
                    if row["key"] in gone:
                        continue
                    yield new.get(row["key"], row)
            yield from added

        _copy(version, rows())
        return version


def create_dataset(
    owner: User,
    name: str,
    description: str = "",
    examples: Sequence[NewExample] = (),
    note: str = "",
) -> Dataset:
    """A new dataset of `owner`'s with version 1 holding `examples` (none: no version yet);
    ProtocolError for a name that is empty, too long or already one of theirs."""
    name = _text("name", name, MAX_NAME_CHARS, required=True)
    description = _text("description", description, MAX_DESCRIPTION_CHARS)
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(
                owner=owner, name=name, description=description
            )
            if examples:  # an empty dataset has no version until something is added
                _new_version(dataset, owner, note or "created", upsert=examples)
    except IntegrityError:
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED, f"You already have a dataset named {name!r}."
        ) from None
    return dataset


def add_examples(
    dataset: Dataset, user: User, examples: Sequence[NewExample], note: str = ""
) -> DatasetVersion:
    """The next version with `examples` added (one with a key already there replaces it)."""
    if not examples:
        raise ProtocolError(ErrorCode.INVALID_INPUT, "Give at least one example.")
    return _new_version(dataset, user, note, upsert=examples)


def remove_examples(
    dataset: Dataset, user: User, keys: Sequence[str], note: str = ""
) -> DatasetVersion:
    """The next version without the examples keyed `keys`."""
    if not keys:
        raise ProtocolError(ErrorCode.INVALID_INPUT, "Name at least one example.")
    return _new_version(dataset, user, note, remove=keys)


def edit_example(
    dataset: Dataset, user: User, key: str, given: dict[str, Any], note: str = ""
) -> DatasetVersion:
    """The next version with example `key` as `given` (an ExampleIn without its id)."""
    latest = latest_version(dataset)
    if latest is None or not latest.examples.filter(key=key).exists():
        raise ProtocolError(
            ErrorCode.NOT_FOUND, f"The dataset's latest version has no example {key!r}."
        )
    before = latest.examples.get(key=key)
    example = checked({**given, "id": key}, source_notebook=before.source_notebook)
    return _new_version(dataset, user, note or f"edited {key}", upsert=[example])


def checked(given: dict[str, Any], source_notebook: int | None = None) -> NewExample:
    """`given` as an example to store; ProtocolError `invalid_input` says what is wrong."""
    try:
        return checked_example(given, source_notebook)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_INPUT, str(exc)) from None


def import_examples(
    dataset: Dataset, user: User, file_name: str, data: bytes
) -> DatasetVersion:
    """The next version with every example of the file added; a bad row refuses the whole
    file (ImportRefused, by line) and nothing is stored."""
    examples = read_examples(file_name, data)
    return _new_version(
        dataset, user, f"imported {file_name}"[:MAX_NOTE_CHARS], upsert=examples
    )


# --- from notebooks ----------------------------------------------------------------------------


def reviewable_notebooks(user_pk: int, pks: Sequence[int]) -> list[Task]:
    """Notebooks `pks` (each once, in the order given) if `user_pk` may review every one, to
    make examples of (runs.traces.examples.example_of); ProtocolError `not_found` names one
    they may not."""
    wanted = list(dict.fromkeys(pks))
    if not wanted:
        raise ProtocolError(ErrorCode.INVALID_INPUT, "Pick at least one notebook.")
    if len(wanted) > MAX_NOTEBOOKS_AT_ONCE:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"{len(wanted):,} notebooks picked; at most {MAX_NOTEBOOKS_AT_ONCE} at once.",
        )
    tasks = Task.objects.select_related("owner").in_bulk(wanted)
    for pk in wanted:
        task = tasks.get(pk)
        if task is None or not may_correct(user_pk, task):
            raise ProtocolError(ErrorCode.NOT_FOUND, f"No such notebook: {pk}.")
    return [tasks[pk] for pk in wanted]


def notebook_example(task_pk: int, made: dict[str, Any]) -> NewExample:
    """The example notebook `task_pk` made (`example_of`'s input, expected_output, metadata),
    checked, under the notebook's key; `not_allowed` for a notebook without a message yet."""
    if not made["input"].get("message"):
        raise ProtocolError(
            ErrorCode.NOT_ALLOWED,
            f"Notebook {task_pk} has no message yet: nothing to make an example of.",
        )
    return checked(
        {
            "id": notebook_key(task_pk),
            "input": made["input"],
            "expected_output": made["expected_output"],
            "metadata": made["metadata"],
        },
        source_notebook=task_pk,
    )


# --- the offline demo ----------------------------------------------------------------------------

DEMO_NAME = "Demo: the example prompts"


def demo_dataset(owner: User) -> Dataset:
    """`owner`'s dataset of the demo model's example prompts (one example each, with its agent;
    no expected answer yet): made on first ask, the same one after."""
    found = Dataset.objects.filter(owner=owner, name=DEMO_NAME).first()
    if found is not None:
        return found
    examples = [
        checked(
            {
                "id": f"demo-{n}",
                "input": {"message": example.prompt, "agent": example.preset},
                "metadata": {"source": "demo example prompts"},
            }
        )
        for n, example in enumerate(demo_examples_for(owner.pk), 1)
    ]
    return create_dataset(
        owner,
        DEMO_NAME,
        "The example prompts of the start page, to run again with the offline demo model.",
        examples,
        note="the demo's example prompts",
    )
