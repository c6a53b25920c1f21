"""Migrations that change constraints on rows that already exist, run forwards on real rows."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

BEFORE = [("runs", "0006_task_fork")]
AFTER = [("runs", "0007_task_agui_thread_per_owner")]


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


@pytest.fixture(autouse=True)
def _latest_schema_after() -> Iterator[None]:
    yield
    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_agui_thread_ids_become_unique_per_owner_keeping_existing_threads() -> None:
    old = _migrate(BEFORE).loader.project_state(BEFORE).apps
    User = old.get_model("auth", "User")
    Task = old.get_model("runs", "Task")
    ana = User.objects.create(username="ana")
    bob = User.objects.create(username="bob")
    kept = Task.objects.create(owner=ana, agent="function_calling", agui_thread="t")
    with pytest.raises(IntegrityError), transaction.atomic():
        Task.objects.create(owner=bob, agent="function_calling", agui_thread="t")

    new = _migrate(AFTER).loader.project_state(AFTER).apps
    Task = new.get_model("runs", "Task")
    assert Task.objects.get(agui_thread="t").pk == kept.pk
    Task.objects.create(owner_id=bob.pk, agent="function_calling", agui_thread="t")
    with pytest.raises(IntegrityError), transaction.atomic():
        Task.objects.create(owner_id=ana.pk, agent="function_calling", agui_thread="t")
