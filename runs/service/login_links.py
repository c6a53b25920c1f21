"""One-time login links (`manage.py login_link`, the page at /login/<token>/): a signed token
that logs one user in once, within AGENTUI_LOGIN_LINK_MAX_AGE seconds."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core import signing
from django.utils.crypto import constant_time_compare, salted_hmac

from runs.conf import conf

__all__ = ["make_login_token", "user_for_login_token"]

_LOGIN_SALT = "agentui.login-link"


def _login_fingerprint(user: AbstractBaseUser) -> str:
    # Logging in updates last_login, so a link stops working once used;
    # a password change also ends it.
    last_login = user.last_login.isoformat() if user.last_login else ""
    value = f"{user.pk}|{user.password}|{last_login}"
    return salted_hmac(_LOGIN_SALT, value).hexdigest()[:32]


def make_login_token(user: AbstractBaseUser) -> str:
    """A signed token that logs `user` in once, within AGENTUI_LOGIN_LINK_MAX_AGE seconds."""
    return signing.dumps(
        {"u": user.pk, "f": _login_fingerprint(user)}, salt=_LOGIN_SALT
    )


def user_for_login_token(token: str) -> AbstractBaseUser | None:
    """The active user `token` was made for, or None if it is forged, expired or used."""
    try:
        data = signing.loads(token, salt=_LOGIN_SALT, max_age=conf().login_link_max_age)
    except signing.BadSignature:  # includes SignatureExpired
        return None
    user = get_user_model().objects.filter(pk=data.get("u"), is_active=True).first()
    if user is None or not constant_time_compare(
        str(data.get("f")), _login_fingerprint(user)
    ):
        return None
    return user
