"""Reading a Prometheus exposition in tests: every sample by name and labels."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition by (name, labels without `process`)."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(
                sorted((k, v) for k, v in sample.labels.items() if k != "process")
            )
            found[(sample.name, labels)] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)
