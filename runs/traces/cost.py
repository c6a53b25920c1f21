"""What model calls cost: stored token usage times the price in force for the model.

None whenever the model has no price row (never a made-up number) or nothing was counted.
"""

from __future__ import annotations

from decimal import Decimal

from runs.models import ModelPrice

MILLION = Decimal(1_000_000)


def price_of(model: str | None) -> ModelPrice | None:
    if not model:
        return None
    return ModelPrice.objects.filter(model=model).first()


def cost_usd(
    price: ModelPrice | None, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """USD for one call (or a sum of calls) at `price`; None without a price."""
    if price is None:
        return None
    cost = (
        Decimal(prompt_tokens or 0) * price.input_usd_per_million
        + Decimal(completion_tokens or 0) * price.output_usd_per_million
    ) / MILLION
    return float(cost)
