"""Datasets of examples made from what people approved, edited and rejected (runs.service.datasets).

A `Dataset` is a named, owned list of examples; what it holds is its versions. A
`DatasetVersion` never changes once made: adding, editing or removing examples makes the next
version, whose `Example` rows are copies (with the change) of the previous version's, so a
version an experiment pinned reads the same forever. An example's `key` follows it from version
to version, so two versions can be compared (added, removed, changed).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Immutable(Exception):
    """A stored version or example was about to be changed; they are only ever added."""


class Dataset(models.Model):
    """A named list of examples, owned by one person; its content is its newest version."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="datasets"
    )
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], name="dataset_name_per_owner"
            )
        ]

    def __str__(self) -> str:
        return self.name


class DatasetVersion(models.Model):
    """One immutable state of a dataset: its examples, who made it, when and why, and how it
    differs from the version before (counted once, when it was made)."""

    dataset = models.ForeignKey(
        Dataset, on_delete=models.CASCADE, related_name="versions"
    )
    number = models.PositiveIntegerField(help_text="1 for the first version")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        related_name="dataset_versions",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    note = models.CharField(max_length=300, blank=True, default="")
    example_count = models.PositiveIntegerField(default=0)
    # against the version before (all added for the first)
    added = models.PositiveIntegerField(default=0)
    removed = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["dataset", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "number"], name="dataset_version_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id} v{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise Immutable(f"version {self.number} of a dataset is never changed")
        super().save(*args, **kwargs)


class Example(models.Model):
    """One example of one version: what to ask (`input`: the first message and everything a
    rerun needs), the answer it should get (`expected_output`; None: none given), the tool calls
    it should make and must not make (`expected_trajectory`), and where it came from
    (`metadata`)."""

    version = models.ForeignKey(
        DatasetVersion, on_delete=models.CASCADE, related_name="examples"
    )
    position = models.PositiveIntegerField(help_text="its place in the version, from 1")
    key = models.CharField(
        max_length=100, help_text="the example's id, the same in every version"
    )
    digest = models.CharField(
        max_length=64, help_text="sha256 of its content: a changed example differs"
    )
    input = models.JSONField()
    expected_output = models.TextField(null=True, blank=True)
    expected_trajectory = models.JSONField(default=dict)
    metadata = models.JSONField(default=dict)
    # the notebook it was made from (its pk, not a key: deleting the notebook changes no
    # version; None for an imported example)
    source_notebook = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["version", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "key"], name="dataset_example_key_per_version"
            ),
            models.UniqueConstraint(
                fields=["version", "position"], name="dataset_example_position"
            ),
        ]

    def __str__(self) -> str:
        return f"example {self.key} of {self.version}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise Immutable("an example of a dataset version is never changed")
        super().save(*args, **kwargs)
