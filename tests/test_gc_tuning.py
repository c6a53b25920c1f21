"""agentui.gc_tuning: a server process freezes its start-up objects out of the collector's walks
and collects young objects less often, unless AGENTUI_GC=default."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from agentui import gc_tuning


@pytest.fixture
def collector() -> Iterator[None]:
    """Put this process's collector back as it was."""
    thresholds = gc.get_threshold()
    frozen = gc.get_freeze_count()
    yield
    if gc.get_freeze_count() != frozen:
        gc.unfreeze()
    gc.set_threshold(*thresholds)
    gc_tuning._tuned = False


def test_a_server_process_freezes_what_it_imported_and_collects_less_often(
    collector: None, settings: Any
) -> None:
    settings.AGENTUI_GC = "tuned"
    before = gc.get_freeze_count()
    assert gc_tuning.tune()
    assert gc.get_freeze_count() > max(before, 10_000)  # Django and the app, at least
    assert gc.get_threshold() == gc_tuning.GC_THRESHOLDS
    assert gc.get_threshold()[0] > 700  # Python's default young threshold
    assert not gc_tuning.tune()  # once per process


def test_agentui_gc_default_leaves_the_collector_alone(
    collector: None, settings: Any
) -> None:
    settings.AGENTUI_GC = "default"
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    assert not gc_tuning.tune()
    assert (gc.get_threshold(), gc.get_freeze_count()) == (thresholds, frozen)
