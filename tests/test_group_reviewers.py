"""Group reviewers (issue 30): a person with `runs.review_group` sees and decides the waiting
steps of the people who share a group with them, from the inbox (socket and REST), under their
own name in the audit; nobody else does, and the notebooks stay their owners'.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Group, Permission, User

from runs import service
from runs.service.reviewers import reviewers_of
from tests.live_support import (
    ANSWER,
    QUESTION,
    analyst_script,
    close_db_connections,  # noqa: F401  (autouse: closes the ORM thread's connection)
    llm_at,
    make_notebook,
    make_user,
    until_true,
)
from tests.rest_support import Api, user_with_token
from tests.test_inbox import _ack, decide, human_actions, inbox_socket, next_list

pytestmark = [pytest.mark.db, pytest.mark.ws, pytest.mark.django_db(transaction=True)]


def team(name: str, *members: User) -> Group:
    group = Group.objects.create(name=name)
    group.user_set.add(*members)
    return group


def may_review(who: User | Group) -> None:
    permission = Permission.objects.get(
        codename="review_group", content_type__app_label="runs"
    )
    if isinstance(who, Group):
        who.permissions.add(permission)
    else:
        who.user_permissions.add(permission)


def people() -> dict[str, User]:
    """ana (analyst) and rita (reviewer, by her group's permission) in `sales`; sam in `sales`
    without the permission; otto reviews, but in another group."""
    made = {name: make_user(name) for name in ("ana", "rita", "sam", "otto")}
    team("sales", made["ana"], made["sam"])
    reviewers = team("sales reviewers", made["rita"])
    reviewers.user_set.add(made["ana"])  # rita and ana share this group too
    may_review(reviewers)
    may_review(made["otto"])
    team("ops", made["otto"])
    return made


async def test_a_reviewer_of_the_group_sees_and_approves_a_members_step_live(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    users = await database_sync_to_async(people)()
    ana, rita, sam, otto = (users[n] for n in ("ana", "rita", "sam", "otto"))
    assert await database_sync_to_async(reviewers_of)(ana.pk) == [rita.pk]
    with llm_at(server):
        task = await database_sync_to_async(make_notebook)(ana, mode="tools")
        reviewer = await inbox_socket(rita)
        member = await inbox_socket(sam)
        outsider = await inbox_socket(otto)
        for ws in (reviewer, member, outsider):
            assert (await next_list(ws, 0))["items"] == []

        await service.send_message(task.pk, QUESTION)
        [item] = (await next_list(reviewer, 1))["items"]
        assert (item["notebook"], item["owner"], item["owner_name"]) == (
            task.pk,
            ana.pk,
            "ana",
        )
        assert [c["tool_name"] for c in item["calls"]] == ["add", "multiply"]
        # a groupmate without the permission, and a reviewer of another group: nothing
        for ws in (member, outsider):
            assert await ws.receive_nothing(timeout=0.3)
            await decide(ws, "x", task.pk, item["step_id"], verdict="approve")
            refused = json.loads(await ws.receive_from(timeout=5))
            assert (refused["type"], refused["code"]) == ("error", "not_found")

        await decide(
            reviewer,
            "r1",
            task.pk,
            item["step_id"],
            verdict="reject",
            text="not on the sales data",
        )
        acked = await until_true(lambda: _ack(reviewer), what="the decision's ack")
        assert acked["request_id"] == "r1"
        await service.wait_idle()
        for ws in (reviewer, member, outsider):
            await ws.disconnect()
    actions = await human_actions(task.pk)
    assert {a["by"] for a in actions} == {
        "rita"
    }  # each call rejected, then the step run
    assert {a["action"] for a in actions} == {"rejected_call", "approved"}
    # the model heard the reviewer's reason
    last = server.requests[-1].messages
    assert any("not on the sales data" in str(m.get("content")) for m in last)
    assert await database_sync_to_async(service.inbox_of)(rita.pk) == []


async def test_over_rest_a_reviewer_decides_from_the_inbox_but_the_notebook_stays_the_owners(
    scripted_server: Any,
) -> None:
    server = scripted_server(analyst_script())
    rita, token = await user_with_token("rita")

    def setting() -> User:
        ana = make_user("ana")
        may_review(team("sales", ana, rita))
        return ana

    ana = await database_sync_to_async(setting)()
    api = Api(token)
    with llm_at(server):
        task = await database_sync_to_async(make_notebook)(ana, mode="tools")
        await service.send_message(task.pk, QUESTION)
        await service.wait_idle()
        listed = (await api.get("/inbox/")).json()
        [item] = listed["items"]
        assert item["owner_name"] == "ana" and listed["count"] == 1
        # the notebook itself is not the reviewer's: it looks missing
        assert (await api.get(f"/notebooks/{task.pk}")).status_code == 404
        direct = await api.post(f"/notebooks/{task.pk}/steps/{item['step_id']}/approve")
        assert direct.status_code == 404
        bad = await api.post(
            "/inbox/decisions",
            {"notebook": task.pk, "step_id": item["step_id"], "verdict": "shrug"},
        )
        assert bad.status_code == 422
        approved = await api.post(
            "/inbox/decisions",
            {"notebook": task.pk, "step_id": item["step_id"], "verdict": "approve"},
        )
        assert approved.status_code == 202, approved.json()
        await service.wait_idle()
        again = await api.post(
            "/inbox/decisions",
            {"notebook": task.pk, "step_id": item["step_id"], "verdict": "approve"},
        )
        assert again.status_code == 409
    turn = await task.turns.aget()
    assert turn.response == ANSWER
    actions = await human_actions(task.pk)
    assert [(a["action"], a["by"]) for a in actions] == [("approved", "rita")]


async def test_an_open_inbox_follows_a_member_added_to_or_removed_from_the_group(
    scripted_server: Any,
) -> None:
    """Who a reviewer reviews changes while their inbox is open (an admin adds a member to
    their group): the new member's waiting step reaches it live, without a reload; after the
    member is removed, their next wait does not."""
    server = scripted_server(analyst_script())
    users = await database_sync_to_async(people)()
    rita, otto = users["rita"], users["otto"]
    newcomer = await database_sync_to_async(make_user)("nina")
    with llm_at(server):
        reviewer = await inbox_socket(rita)
        outsider = await inbox_socket(otto)
        for ws in (reviewer, outsider):
            assert (await next_list(ws, 0))["items"] == []
        sales_reviewers = await Group.objects.aget(name="sales reviewers")
        # as Django admin's group form would
        await database_sync_to_async(sales_reviewers.user_set.add)(newcomer)
        await next_list(reviewer, 0)  # the regrouped socket sends its list again
        task = await database_sync_to_async(make_notebook)(newcomer, mode="tools")
        await service.send_message(task.pk, QUESTION)
        [item] = (await next_list(reviewer, 1))["items"]
        assert (item["notebook"], item["owner_name"]) == (task.pk, "nina")
        assert await outsider.receive_nothing(timeout=0.3)

        # removed from the group (from the person's side, as the user form does)
        await database_sync_to_async(newcomer.groups.remove)(sales_reviewers)
        await next_list(reviewer, 0)  # nina's step is no longer rita's to decide
        await service.abandon(task.pk)
        await service.wait_idle()
        second = await database_sync_to_async(make_notebook)(newcomer, mode="tools")
        await service.send_message(second.pk, QUESTION)
        await until_true(
            lambda: database_sync_to_async(service.inbox_count)(newcomer.pk),
            what="nina's second wait",
        )
        assert await reviewer.receive_nothing(timeout=0.5)
        await service.abandon(second.pk)
        await service.wait_idle()
        for ws in (reviewer, outsider):
            await ws.disconnect()


def _relations_cases() -> list[tuple[str, Any, set[str]]]:
    """Each change that decides who reviews whom, from either side of its relation, with the
    people whose inboxes must reread whom they follow (see `people()` for who is where)."""

    def group(name: str) -> Group:
        return Group.objects.get(name=name)

    def user(name: str) -> User:
        return User.objects.get(username=name)

    def permission() -> Permission:
        return Permission.objects.get(
            codename="review_group", content_type__app_label="runs"
        )

    def deactivated(name: str) -> None:
        who = user(name)
        who.is_active = False
        who.save()

    def logged_in(name: str) -> None:
        user(name).save(update_fields=["last_login"])

    return [
        (
            "nina joins sales (user form)",
            lambda: user("nina").groups.add(group("sales")),
            {"nina", "ana", "sam"},
        ),
        (
            "nina joins ops (group form)",
            lambda: group("ops").user_set.add(user("nina")),
            {"nina", "otto"},
        ),
        (
            "sales may review",
            lambda: group("sales").permissions.add(permission()),
            {"ana", "sam", "nina"},
        ),
        (
            "ops may review (permission side)",
            lambda: permission().group_set.add(group("ops")),
            {"otto", "nina"},
        ),
        (
            "otto may not review himself",
            lambda: user("otto").user_permissions.remove(permission()),
            {"otto", "nina"},
        ),
        (
            "rita may review directly",
            lambda: user("rita").user_permissions.add(permission()),
            {"rita", "ana"},
        ),
        (
            "nobody may review directly",
            lambda: permission().user_set.clear(),
            {"rita", "ana"},
        ),
        (
            "sales emptied",
            lambda: group("sales").user_set.clear(),
            {"ana", "sam", "nina"},
        ),
        ("rita deactivated", lambda: deactivated("rita"), {"rita", "ana"}),
        ("ana logs in", lambda: logged_in("ana"), set()),
    ]


async def test_every_change_to_who_reviews_whom_tells_exactly_the_people_it_touches() -> (
    None
):
    """Membership and the review permission change from either side of their relation (the
    user form, the group form, the permission's side, a clear), and a user is deactivated: each
    tells the inboxes of the people it touches, after the commit, and a login tells nobody."""
    from channels.layers import get_channel_layer

    from runs.models import inbox_group_name
    from runs.service.regroup import REGROUP_MESSAGE

    users = await database_sync_to_async(people)()
    users["nina"] = await database_sync_to_async(make_user)("nina")
    layer = get_channel_layer()
    channels = {}
    for name, who in users.items():
        channels[name] = await layer.new_channel()
        await layer.group_add(inbox_group_name(who.pk), channels[name])
    for what, change, told in await database_sync_to_async(_relations_cases)():
        await database_sync_to_async(change)()
        heard = set()
        for name, who in users.items():
            # a marker after the change: what the channel hears before it is what the change sent
            await layer.group_send(inbox_group_name(who.pk), {"type": "test.marker"})
            while (message := await layer.receive(channels[name]))[
                "type"
            ] != "test.marker":
                assert message == {"type": REGROUP_MESSAGE, "user": who.pk}, what
                heard.add(name)
        assert heard == told, what
