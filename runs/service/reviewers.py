"""Group reviewers: a person with the `runs.review_group` permission (given in Django admin, to
the person or to one of their groups) decides the waiting steps of the notebooks of everyone
who shares a group with them, from the inbox (page, websocket, REST).

Only there: a reviewer does not open another person's notebook (its page, socket, REST and
AG-UI stay the owner's), so what a reviewer may do is exactly the inbox's decisions (approve,
with edits; reject every call with a reason; answer a question), each recorded in the audit
under the reviewer's name. A superuser reviews the members of their own groups only, as
anyone with the permission.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Q

PERMISSION = "runs.review_group"
_APP, _CODENAME = PERMISSION.split(".")


def _with_permission() -> Q:
    """Users holding the permission: themselves, through a group, or as superusers."""
    held = Q(user_permissions__codename=_CODENAME) & Q(
        user_permissions__content_type__app_label=_APP
    )
    through_group = Q(groups__permissions__codename=_CODENAME) & Q(
        groups__permissions__content_type__app_label=_APP
    )
    return Q(is_superuser=True) | held | through_group


def reviewees(user_pk: int) -> list[int]:
    """The people whose waiting steps `user_pk` reviews (none without the permission)."""
    users = get_user_model().objects
    if not users.filter(_with_permission(), pk=user_pk, is_active=True).exists():
        return []
    return list(
        users.filter(groups__user=user_pk, is_active=True)
        .exclude(pk=user_pk)
        .values_list("pk", flat=True)
        .distinct()
    )


def reviewers_of(owner_pk: int) -> list[int]:
    """Who reviews `owner_pk`'s waiting steps: holders of the permission in a group with them."""
    users = get_user_model().objects
    sharing = users.filter(groups__user=owner_pk, is_active=True).exclude(pk=owner_pk)
    return list(
        users.filter(_with_permission(), is_active=True, pk__in=sharing.values("pk"))
        .values_list("pk", flat=True)
        .distinct()
    )


def may_review(user_pk: int, owner_pk: int) -> bool:
    return owner_pk != user_pk and owner_pk in reviewees(user_pk)
