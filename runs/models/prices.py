"""What each model costs per token (runs.store.cost)."""

from __future__ import annotations

from django.db import models


class ModelPrice(models.Model):
    """What a model costs, in US dollars per million tokens, for the cost shown on steps,
    turns and notebooks (edited in the Django admin; a model without a row has no cost)."""

    model = models.CharField(max_length=200, unique=True)
    input_usd_per_million = models.DecimalField(max_digits=12, decimal_places=6)
    output_usd_per_million = models.DecimalField(max_digits=12, decimal_places=6)

    def __str__(self) -> str:
        return self.model
