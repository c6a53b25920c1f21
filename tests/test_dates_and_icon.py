"""Dates the server writes are in one format (the admin as the pages), the deleted page's date is
one format.js rewrites as every other, and no page, admin or not, asks for an icon that is not
there."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import DeletedNotebook

pytestmark = pytest.mark.django_db

WHEN = dt.datetime(2026, 12, 3, 14, 5, tzinfo=dt.UTC)


def _deleted(owner: User) -> DeletedNotebook:
    record = DeletedNotebook.objects.create(
        notebook_id=4242,
        owner=owner,
        owner_name=owner.username,
        title="Old forks",
        deleted_by=owner.username,
        created_at=WHEN,
    )
    DeletedNotebook.objects.filter(pk=record.pk).update(deleted_at=WHEN)
    return record


def _operator() -> Client:
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(root)
    return client


def test_the_admin_writes_dates_as_the_pages_do() -> None:
    client = _operator()
    _deleted(User.objects.get(username="root"))
    page = client.get("/admin/runs/deletednotebook/").content.decode()
    assert "2026-12-03 14:05" in page
    assert "Dec. 3, 2026" not in page and "p.m." not in page


def test_the_deleted_page_date_is_rewritten_as_every_other_date() -> None:
    ana = User.objects.create_user("ana", password="pw")
    _deleted(ana)
    client = Client()
    client.force_login(ana)
    page = client.get("/tasks/4242/")
    assert page.status_code == 410
    found = re.search(r"<time ([^>]*)>([^<]*)</time>", page.content.decode())
    assert found is not None
    attributes, text = found.groups()
    assert (
        "data-when" in attributes
    )  # format.js: "3 minutes ago", the full date in its tooltip
    assert 'datetime="2026-12-03T14:05:00+00:00"' in attributes
    assert (
        text == "2026-12-03 14:05"
    )  # before the script runs, as the other pages write it


def test_admin_pages_name_the_app_icon_and_favicon_ico_leads_to_it() -> None:
    operator = _operator()
    for client, path in (
        (operator, "/admin/"),
        (operator, "/admin/runs/deletednotebook/"),
        (operator, "/admin/runs/task/add/"),  # a form page: its own media after ours
        (Client(), "/admin/login/"),
    ):
        page = client.get(path)
        assert page.status_code == 200, path
        icon = r'<link rel="icon" href="/static/img/favicon\.svg"'
        assert re.search(icon, page.content.decode()), path
    answer = Client().get("/favicon.ico")
    assert answer.status_code == 301
    assert answer["Location"] == "/static/img/favicon.svg"
    assert Client().get(answer["Location"]).status_code == 200
