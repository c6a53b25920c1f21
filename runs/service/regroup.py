"""An open inbox follows changes to who reviews whom, without a reload.

Whose waiting steps a person's inbox holds (runs.service.inbox.inbox_owners) depends on group
membership, the `runs.review_group` permission (held directly, through a group, or as a
superuser) and who is active. An open inbox socket listens on the inbox groups of exactly those
owners, read when it connected, so a member added to a reviewer's group later was not heard
until the page was reloaded (and one removed was still listened to).

So when any of those change, in Django admin or in code, every person whose set of reviewees or
reviewers may have changed hears `inbox.regroup` on their own inbox group, once the change is
committed; each of their open sockets reads its owners again, joins and leaves groups to match,
and sends the list (runs.web.inbox_consumer). Who is told is deliberately wide (every member of
a group whose membership or permissions changed): a socket that rereads and finds nothing new
costs one query.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction
from django.db.models.signals import m2m_changed, post_save

from runs.models import inbox_group_name
from runs.realtime import broadcast

REGROUP_MESSAGE = "inbox.regroup"
# a user's save that changes none of these (a login's `last_login`) changes no reviewer
_REVIEW_FIELDS = {"is_active", "is_superuser"}


def _members(group_pks: Iterable[int]) -> set[int]:
    return set(
        get_user_model()
        .objects.filter(groups__in=list(group_pks))
        .values_list("pk", flat=True)
    )


def _groups_of(user_pks: Iterable[int]) -> set[int]:
    return set(
        Group.objects.filter(user__in=list(user_pks)).values_list("pk", flat=True)
    )


def tell(user_pks: Iterable[int]) -> None:
    """Tell these people's open inboxes to read whom they follow again, after the commit."""
    pks = sorted(set(user_pks))
    if not pks:
        return

    def send() -> None:
        for pk in pks:
            # a reviewer's socket also listens on their reviewees' groups: `user` says whose
            # sockets are meant
            async_to_sync(broadcast.group_send)(
                inbox_group_name(pk), {"type": REGROUP_MESSAGE, "user": pk}
            )

    transaction.on_commit(send)


# the m2m relations that decide who reviews whom, by their through model: each side's role
# ("user", "group", "permission") and its field there, read forward (instance side first)
_RELATIONS: dict[type, tuple[tuple[str, str], tuple[str, str]]] = {}


def _relation_changed(
    sender: Any,
    instance: Any,
    action: str,
    reverse: bool,
    pk_set: set[int] | None,
    **_: Any,
) -> None:
    # pre_clear: the related rows are still there to be named; post_clear would know none
    if action not in ("post_add", "post_remove", "pre_clear"):
        return
    (own, own_field), (other, other_field) = _RELATIONS[sender]
    if reverse:
        (own, own_field), (other, other_field) = (other, other_field), (own, own_field)
    related = set(pk_set or ()) or set(
        sender.objects.filter(**{f"{own_field}_id": instance.pk}).values_list(
            f"{other_field}_id", flat=True
        )
    )
    sides = {own: {instance.pk}, other: related}
    users = sides.get("user", set())
    # a user's own permission changes whom the members of their groups review with them
    groups = sides["group"] if "group" in sides else _groups_of(users)
    tell(users | _members(groups))


def _user_saved(
    instance: Any, created: bool, update_fields: Any = None, **_: Any
) -> None:
    if created or (
        update_fields is not None and not _REVIEW_FIELDS & set(update_fields)
    ):
        return
    tell({instance.pk} | _members(_groups_of([instance.pk])))


def connect() -> None:
    """Listen for the changes (runs.apps.RunsConfig.ready)."""
    user_model = get_user_model()
    uid = "runs.service.regroup"
    roles = {user_model: "user", Group: "group", Permission: "permission"}
    for through in (
        user_model.groups.through,
        Group.permissions.through,
        user_model.user_permissions.through,
    ):
        # an auto-created through model has the source's field first, then the target's
        own, other = (f for f in through._meta.fields if f.related_model in roles)
        _RELATIONS[through] = (
            (roles[own.related_model], own.name),
            (roles[other.related_model], other.name),
        )
        m2m_changed.connect(
            _relation_changed, sender=through, dispatch_uid=f"{uid}.{through.__name__}"
        )
    post_save.connect(_user_saved, sender=user_model, dispatch_uid=uid + ".u")
