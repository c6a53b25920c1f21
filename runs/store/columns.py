"""Quoted table and column names of our models, for the few statements written as raw SQL."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Field


def column(model: type[Any], name: str) -> str:
    """The quoted column of `model`'s concrete field `name` (a foreign key's `..._id`)."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or field.column is None:
        raise TypeError(f"{model.__name__}.{name} has no column")
    return str(connection.ops.quote_name(field.column))


def table(model: type[Any]) -> str:
    return str(connection.ops.quote_name(model._meta.db_table))


def pk_column(model: type[Any]) -> str:
    return column(model, model._meta.pk.name)
