"""What model calls cost: stored token usage times the price in force for the model.

None whenever the model has no price row (never a made-up number) or nothing was counted.
In the storage layer because the traces (what was spent, shown) and the service (budgets,
enforced) read the same numbers: one calculation, never two that could disagree.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db.models import IntegerField, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from runs.models import Event, ModelPrice

MILLION = Decimal(1_000_000)


USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


def call_usage(events: QuerySet[Event], by: str) -> dict[Any, dict[str, int]]:
    """The tokens the model calls among `events` used, summed per value of the field `by`
    ("task_id", "turn_id", "task__model"): every call that returned, whether its step then
    completed, was stopped or was undone, since each was paid for. One `agent_output` event per
    call carries its usage; a stream cut off part way returns none and counts nothing."""
    sums = {
        key: Sum(Cast(KT(f"payload__usage__{key}"), IntegerField()))
        for key in USAGE_KEYS
    }
    rows = events.filter(type="agent_output").values(by).annotate(**sums)
    return {row.pop(by): {k: v or 0 for k, v in row.items()} for row in rows}


def price_of(model: str | None) -> ModelPrice | None:
    if not model:
        return None
    return ModelPrice.objects.filter(model=model).first()


def model_of(task: Any, default: str | None) -> str | None:
    """The model a notebook calls: its own (a composed notebook's), else the configured one."""
    return getattr(task, "model", "") or default


def cost_decimal(
    price: ModelPrice | None, prompt_tokens: int | None, completion_tokens: int | None
) -> Decimal | None:
    """USD for one call (or a sum of calls) at `price`, exactly; None without a price."""
    if price is None:
        return None
    return (
        Decimal(prompt_tokens or 0) * price.input_usd_per_million
        + Decimal(completion_tokens or 0) * price.output_usd_per_million
    ) / MILLION


def cost_usd(
    price: ModelPrice | None, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """USD for one call (or a sum of calls) at `price`; None without a price."""
    cost = cost_decimal(price, prompt_tokens, completion_tokens)
    return None if cost is None else float(cost)


def with_cost(usage: dict[str, Any], price: ModelPrice | None) -> dict[str, Any]:
    """A usage dict (prompt/completion/total tokens) with its `cost_usd` (None: no price)."""
    return {
        **usage,
        "cost_usd": cost_usd(
            price, usage.get("prompt_tokens"), usage.get("completion_tokens")
        ),
    }


def price_json(price: ModelPrice | None) -> dict[str, Any] | None:
    """The price as a page reads it, to cost streamed steps itself (None: the price is unknown)."""
    if price is None:
        return None
    return {
        "model": price.model,
        "input_usd_per_million": float(price.input_usd_per_million),
        "output_usd_per_million": float(price.output_usd_per_million),
    }
