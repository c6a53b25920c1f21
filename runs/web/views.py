"""Pages of the runs app: the start page and one-time login links."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_http_methods

from runs.conf import conf
from runs.service import (
    inbox_count,
    llm_settings,
    user_for_login_token,
    user_presets,
)
from runs.web.pages import example_choices

# --- Navigation -------------------------------------------------------------


@dataclass(frozen=True)
class NavLink:
    label: str
    url: str
    active: bool
    count: int | None = (
        None  # the inbox's: steps waiting for the person (kept live by JS)
    )


def navigation(request: HttpRequest) -> dict[str, list[NavLink]]:
    """Context processor: the header links of AGENTUI_NAV that resolve."""
    match = getattr(request, "resolver_match", None)
    current = match.view_name if match else None
    links = []
    for label, url_name in conf().nav:
        try:
            url = reverse(url_name)
        except NoReverseMatch:  # a page listed before it exists
            continue
        count = (
            inbox_count(request.user.pk)
            if url_name == "runs:inbox" and request.user.is_authenticated
            else None
        )
        # the Review menu's link stays current on every page under it (a dataset's page)
        under = url.startswith("/review/") and request.path.startswith(url)
        links.append(NavLink(label, url, url_name == current or under, count))
    return {"nav_links": links}


# --- One-time login links ---------------------------------------------------


@login_not_required
@require_http_methods(["GET", "POST"])
def login_with_link(request: HttpRequest, token: str) -> HttpResponse:
    """Log in with a link printed by `make run` or `manage.py login_link`.

    A browser logged in as someone else is not switched by opening the link (a page elsewhere
    could make it do that: login CSRF); it is asked first, and only the POST of that page's
    form (with its CSRF token) logs in and spends the link. A browser not logged in, or
    logged in as the same person, is logged in by the GET itself.
    """
    user = user_for_login_token(token)
    if user is None:
        return render(request, "registration/login_link_invalid.html", status=403)
    current = request.user
    if request.method == "GET" and current.is_authenticated and current.pk != user.pk:
        context = {"signed_in_as": current.get_username(), "link_user": user}
        return render(request, "registration/login_link_confirm.html", context)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect("runs:index")


# --- Pages ------------------------------------------------------------------


def index(request: HttpRequest) -> HttpResponse:
    """Start page: the app is up, which model it uses, what the demo model can do."""
    context = {
        "llm": llm_settings(start_demo=False),
        "examples": example_choices(request.user.pk),
        "my_presets": user_presets(request.user),  # type: ignore[arg-type]
    }
    return render(request, "runs/index.html", context)
