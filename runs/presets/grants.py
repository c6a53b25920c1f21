"""Who may use an admin-configured thing (an MCP server, a database source): its rows that are
enabled and given to everyone, to the user, or to a group the user is in."""

from __future__ import annotations

from typing import Any

from django.db.models import Model, Q


def granted_to(model: type[Model], user_id: int) -> Any:
    """`model`'s enabled rows `user_id` was granted (it has `enabled`, `everyone`, `users` and
    `groups`), by name."""
    return (
        model._default_manager.filter(enabled=True)
        .filter(Q(everyone=True) | Q(users__id=user_id) | Q(groups__user__id=user_id))
        .distinct()
        .order_by("name")
    )
