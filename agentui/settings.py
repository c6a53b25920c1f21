"""Django settings for agentui, read from the environment.

With no environment at all this gives a working local setup: SQLite in the
project folder, the in-memory channel layer and the offline demo model.
A malformed value raises ImproperlyConfigured("NAME: reason"), which
manage.py prints as one line.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import dj_database_url
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from runs import conf as _conf
from runs.telemetry.config import TelemetryConfigError
from runs.telemetry.config import from_environ as _telemetry_from_environ

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def _env_bool(name: str, default: bool) -> bool:
    raw = _env(name).lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}: expected true or false, got {os.environ[name]!r}"
    )


def _env_list(name: str, default: list[str]) -> list[str]:
    raw = _env(name)
    if not raw:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def _env_hosts(name: str, default: list[str]) -> list[str]:
    """Host names (`example.org`, `.example.org` for its subdomains, `*`), comma-separated."""
    hosts = _env_list(name, default)
    for host in hosts:
        if "://" in host or "/" in host or " " in host:
            raise ImproperlyConfigured(
                f"{name}: {host!r} is not a host name (no scheme or path: example.org)"
            )
    return hosts


def _env_origins(name: str) -> list[str]:
    """Origins (`https://example.org`, `https://*.example.org`, with a port if not the default)."""
    origins = _env_list(name, [])
    for origin in origins:
        parts = urlsplit(origin)
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ImproperlyConfigured(
                f"{name}: {origin!r} is not an origin (expected https://example.org)"
            )
        if parts.path.strip("/") or parts.query or parts.fragment:
            raise ImproperlyConfigured(
                f"{name}: {origin!r} has a path; give only scheme://host[:port]"
            )
    return [origin.rstrip("/") for origin in origins]


def _env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """`X-Forwarded-Proto,https`: the header a TLS proxy sets and its value for https."""
    raw = _env(name)
    if not raw:
        return None
    header, _, value = raw.partition(",")
    header, value = header.strip(), value.strip()
    if not header or not value or not all(c.isalnum() or c == "-" for c in header):
        raise ImproperlyConfigured(
            f"{name}: expected a header and its value for https, such as"
            f" X-Forwarded-Proto,https; got {raw!r}"
        )
    return "HTTP_" + header.upper().replace("-", "_"), value


def _env_seconds_whole(name: str) -> int:
    """A whole number of seconds (>= 0); 0 when unset."""
    raw = _env(name)
    if not raw:
        return 0
    if not raw.isdigit():
        raise ImproperlyConfigured(
            f"{name}: expected a whole number of seconds >= 0, got {raw!r}"
        )
    return int(raw)


def _env_whole(name: str, default: int) -> int:
    """A whole number >= 0; `default` when unset."""
    raw = _env(name)
    if not raw:
        return default
    if not raw.isdigit():
        raise ImproperlyConfigured(f"{name}: expected a whole number, got {raw!r}")
    return int(raw)


def _port_problem(name: str, url: str) -> str | None:
    """The reason `url` has an unusable port, or None."""
    try:
        _ = urlsplit(url).port
    except ValueError as exc:  # urllib says "Port out of range" / "could not be cast"
        return f"{name}: bad port ({exc})"
    return None


def _local_secret_key(path: Path) -> str:
    """Read the generated key, creating it once (race-free) if it is missing."""
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = None
    if key:
        return key
    if key == "":
        raise ImproperlyConfigured(
            f"SECRET_KEY: {path} is empty; delete it or set SECRET_KEY"
        )
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(get_random_secret_key() + "\n")
        tmp.chmod(0o600)
        try:
            os.link(tmp, path)  # fails if another process won the race; then use theirs
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        return path.read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(
            f"SECRET_KEY: not set, and cannot keep a generated one in {path} ({exc.strerror})"
        ) from None


_POSTGRES_SCHEMES = {"postgres", "postgresql", "pgsql"}


def _database(url: str) -> dict[str, object]:
    """DATABASES['default'] for DATABASE_URL; SQLite in the project folder when unset."""
    sqlite_options = {
        # Notebook steps write from several threads: wait for locks, take the
        # write lock up front and let readers run beside one writer.
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        # WAL with synchronous=NORMAL syncs at checkpoints, not at every commit: a commit is
        # still atomic and survives the process dying (kill -9); only a power cut can lose the
        # last commits. Every stored event is a commit, so this is most of a busy notebook's cost.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Keep each thread's connection between requests (checked before reuse): Channels runs every
    # database call of a socket or a step through one thread, and with a connection opened and
    # closed per call (Django's default) that thread spent most of its time connecting.
    reuse: dict[str, object] = {
        "CONN_MAX_AGE": _AGENTUI.db_conn_max_age_s,
        "CONN_HEALTH_CHECKS": True,
    }
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": BASE_DIR / "db.sqlite3",
            "OPTIONS": sqlite_options,
            **reuse,
        }
    scheme = urlsplit(url).scheme
    if scheme not in _POSTGRES_SCHEMES | {"sqlite"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL: unsupported scheme {scheme!r}; "
            "use postgres://user:password@host:port/name or sqlite:///path/to/file.sqlite3"
        )
    problem = _port_problem("DATABASE_URL", url)
    if problem:
        raise ImproperlyConfigured(problem)
    try:
        config: dict[str, object] = {**dj_database_url.parse(url), **reuse}
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL: {exc}") from None
    if not config.get("NAME"):
        raise ImproperlyConfigured(
            "DATABASE_URL: no database name (expected .../name at the end)"
        )
    options = dict(config.get("OPTIONS") or {})  # type: ignore[call-overload]
    if scheme == "sqlite":
        config["OPTIONS"] = {**sqlite_options, **options}
    else:
        # Fail in seconds, not minutes, when the server is unreachable.
        config["OPTIONS"] = {"connect_timeout": 10, **options}
        # Django's backend, checking a reused connection at most every few seconds instead of
        # before every database_sync_to_async call (agentui.postgresql.base)
        config["ENGINE"] = "agentui.postgresql"
    test_name = _AGENTUI.test_db_name
    if test_name:
        # Lets parallel test runs on one server use separate test databases.
        config["TEST"] = {"NAME": test_name}
    return config


def _channel_layers(url: str) -> dict[str, dict[str, object]]:
    """CHANNEL_LAYERS for REDIS_URL; the in-process layer when unset."""
    if not url:
        # channels.layers.InMemoryChannelLayer without its sweep of every socket per message;
        # a queue per socket: 1,000 is ~20 s of a reply streamed at 50 tokens/s (100, the
        # default, dropped copies for sockets a busy process was a few seconds behind on)
        return {
            "default": {
                "BACKEND": "agentui.inmemory_layer.InMemoryLayer",
                "CONFIG": {"capacity": 1000},
            }
        }
    parts = urlsplit(url)
    if parts.scheme not in {"redis", "rediss", "unix"}:
        raise ImproperlyConfigured(
            f"REDIS_URL: unsupported scheme {parts.scheme!r}; use redis://host:port/db"
        )
    problem = _port_problem("REDIS_URL", url)
    if problem:
        raise ImproperlyConfigured(problem)
    if parts.scheme != "unix":
        if not parts.hostname:
            raise ImproperlyConfigured(
                "REDIS_URL: no host (expected redis://host:port/db)"
            )
        db = parts.path.lstrip("/")
        if db and not db.isdigit():
            raise ImproperlyConfigured(f"REDIS_URL: database {db!r} is not a number")
    else:
        db = parse_qs(parts.query).get("db", [""])[0]
    return {
        "default": {
            # channels-redis's pub/sub layer: a group message is published once and each process
            # hands it to its own sockets (agentui/pubsub_layer.py; the core layer's per-socket
            # Redis queues cost ~1 ms of CPU per streamed token, docs/benchmarks.md)
            "BACKEND": "agentui.pubsub_layer.PubSubLayer",
            "CONFIG": {
                # redis-py's pool holds 100 connections by default and then raises
                # MaxConnectionsError, which a socket takes for Redis being down (500 notebooks
                # on two processes: sockets went `live` false and read the database every second)
                "hosts": [
                    {"address": url, "socket_timeout": 30, "max_connections": 1000}
                ],
                # per socket, as in-process: ~20 s of a reply streamed at 50 tokens/s
                "capacity": 1000,
                # Redis's pub/sub channels ignore the database number: two sites on one Redis
                # (different databases) must not hear each other's notebooks
                "prefix": f"agentui.db{db or 0}.",
            },
        }
    }


def _turn_queue(url: str, capacity: int) -> dict[str, object]:
    """The turn workers' queue (AGENTUI_TURN_WORKERS): channels-redis's core layer, whose
    channels are lists in Redis, so each action is taken by exactly one worker (the pub/sub
    layer of `default` would hand it to every worker)."""
    return {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [{"address": url}],
            "prefix": "agentui.turns.",
            "channel_capacity": {_conf.TURN_CHANNEL: capacity},
            # each web process's reply channel: one answer per action it waits for
            "capacity": max(capacity, 1000),
            # an action nobody took is refused after AGENTUI_TURN_WORKER_WAIT_S; this only
            # keeps Redis from holding it for ever
            "expiry": 60,
        },
    }


def _check_llm(api_key: str, base_url: str, model: str) -> None:
    if base_url:
        parts = urlsplit(base_url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ImproperlyConfigured(
                "OPENAI_BASE_URL: expected an http(s) URL such as http://localhost:11434/v1"
            )
        problem = _port_problem("OPENAI_BASE_URL", base_url)
        if problem:
            raise ImproperlyConfigured(problem)
        if not model:
            raise ImproperlyConfigured(
                "AGENTUI_MODEL: required with OPENAI_BASE_URL (the model name your server serves)"
            )
    elif model and not api_key:
        raise ImproperlyConfigured(
            "OPENAI_API_KEY: AGENTUI_MODEL is set but neither OPENAI_API_KEY (OpenAI) "
            "nor OPENAI_BASE_URL (a local server) is"
        )


# --- agentui's own settings: every AGENTUI_* variable (runs/conf.py) -----------

try:
    _AGENTUI = _conf.from_environ(os.environ, base_dir=BASE_DIR)
except _conf.ConfError as exc:
    raise ImproperlyConfigured(str(exc)) from None
# Each as the Django setting of its name (AGENTUI_LEASE_STALE_S, ...), so tests can override
# them; code reads them as one object, runs.conf.conf().
globals().update(_conf.as_django_settings(_AGENTUI))

# --- Core -------------------------------------------------------------------

SECRET_KEY = _env("SECRET_KEY") or _local_secret_key(BASE_DIR / ".local" / "secret_key")
# Off unless DEBUG=true: Django's debug pages show tracebacks, settings and the URL map.
DEBUG = _env_bool("DEBUG", False)
ALLOWED_HOSTS = _env_hosts("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "daphne",  # first: runserver serves ASGI through daphne
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",  # the REST API's docs page with its own Swagger UI files (no CDN)
    "csp",  # the Content-Security-Policy (agentui.security): its system checks
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # JSON error answers under /api/ and /agui/, DEBUG's HTML pages included (agentui/errors.py)
    "agentui.errors.JsonErrorsMiddleware",
    # before WhiteNoise, so static files get the policy too (see "Security headers" below)
    "agentui.security.ContentSecurityPolicyMiddleware",
    # WhiteNoise, async-capable: the chain stays async under ASGI (agentui/static_files.py)
    "agentui.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs a login unless its view is marked @login_not_required:
    # analysts' tasks are private. Websocket consumers check scope["user"] themselves.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# --- Security headers (docs/operations.md) -----------------------------------

# Model output is untrusted (text, tool arguments, chart specs): the policy is the last line if
# something it wrote reached the page. Scripts only from this origin (and a request's nonce),
# never inline or eval'd; nothing loaded from or sent to another origin; no plugins, no framing,
# no <base>, forms post only here. Styles only from files (the templates and scripts set none
# inline). agentui.security adds the page's websocket origin to connect-src and counts reports.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "media-src": [NONE],
        "object-src": [NONE],
        "frame-src": [NONE],
        "worker-src": [SELF],  # a chart's trial run (static/js/render/chart_worker.js)
        "frame-ancestors": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "report-uri": "/csp-report/",
    }
}
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

ROOT_URLCONF = "agentui.urls"
ASGI_APPLICATION = "agentui.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "runs.web.views.navigation",
            ],
        },
    },
]

# --- Data and messaging -----------------------------------------------------

DATABASES = {"default": _database(_env("DATABASE_URL"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = _env("REDIS_URL")
CHANNEL_LAYERS = _channel_layers(REDIS_URL)
if _AGENTUI.turn_workers == "1":
    if not REDIS_URL:
        raise ImproperlyConfigured(
            "AGENTUI_TURN_WORKERS: needs REDIS_URL (the turn workers' queue is in Redis)"
        )
    CHANNEL_LAYERS[_conf.TURN_LAYER] = _turn_queue(
        REDIS_URL, _AGENTUI.turn_queue_capacity
    )

# --- The language model (resolved by runs.service.llm) -----------------------

OPENAI_API_KEY = _env("OPENAI_API_KEY")
OPENAI_BASE_URL = _env("OPENAI_BASE_URL").rstrip("/")
_check_llm(OPENAI_API_KEY, OPENAI_BASE_URL, _AGENTUI.model)

# --- Auth ---------------------------------------------------------------------

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs:index"
LOGOUT_REDIRECT_URL = "login"

# OpenTelemetry export of runs as OpenInference spans: None (off) unless an OTLP endpoint is set.
try:
    AGENTUI_TELEMETRY = _telemetry_from_environ(
        os.environ, project=_AGENTUI.otel_project
    )
except TelemetryConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None

# Django's own checks behind the body limit (agentui/body_limit.py): a body is held in memory
# only up to 64 KiB, beyond that it (and every uploaded file) is spooled to a temporary file;
# form fields at most AGENTUI_MAX_BODY_BYTES.
FILE_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = _AGENTUI.max_body_bytes
DATA_UPLOAD_MAX_NUMBER_FILES = 10

AUTH_PASSWORD_VALIDATORS = [
    {
        "NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"
    },
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Error answers and running behind TLS (issue 24; docs/operations.md, "Running behind TLS") --
# A failed CSRF check under /api/ and /agui/ is JSON (agentui/errors.py), a page elsewhere.
CSRF_FAILURE_VIEW = "agentui.errors.csrf_failure"
# All off by default (a local `make run` is plain http); a malformed value stops every command
# with a line naming it.
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", False)
SECURE_PROXY_SSL_HEADER = _env_proxy_ssl_header("SECURE_PROXY_SSL_HEADER")
SECURE_HSTS_SECONDS = _env_seconds_whole("SECURE_HSTS_SECONDS")
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", False)
if SECURE_HSTS_PRELOAD and (
    SECURE_HSTS_SECONDS < 31_536_000 or not SECURE_HSTS_INCLUDE_SUBDOMAINS
):
    raise ImproperlyConfigured(
        "SECURE_HSTS_PRELOAD: browsers' preload lists need SECURE_HSTS_SECONDS >= 31536000"
        " (a year) and SECURE_HSTS_INCLUDE_SUBDOMAINS=true"
    )
if SECURE_HSTS_INCLUDE_SUBDOMAINS and not SECURE_HSTS_SECONDS:
    raise ImproperlyConfigured(
        "SECURE_HSTS_INCLUDE_SUBDOMAINS: has no effect without SECURE_HSTS_SECONDS > 0"
    )
CSRF_TRUSTED_ORIGINS = _env_origins("CSRF_TRUSTED_ORIGINS")
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", False)

# --- Email ("waiting for you", runs.service.notify) --------------------------

# The console backend (emails printed to the server's output) unless EMAIL_BACKEND names
# another, e.g. django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST and friends.
EMAIL_BACKEND = _env("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = _env("EMAIL_HOST", "localhost")
EMAIL_PORT = _env_whole("EMAIL_PORT", 25)
EMAIL_HOST_USER = _env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = _env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = _env("DEFAULT_FROM_EMAIL", "agentui@localhost")

# --- Pages ------------------------------------------------------------------

# Header navigation, AGENTUI_NAV: (label, URL name) pairs, runs.conf.NAV unless set here. A link
# whose URL name does not resolve yet is left out, so pages can be listed before they exist.

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# dates the server writes (the admin, a page's text before format.js rewrites it) in one format:
# agentui/formats/en/formats.py (a locale's formats win over DATETIME_FORMAT, so a module)
FORMAT_MODULE_PATH = ["agentui.formats"]

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = (
    BASE_DIR / "staticfiles"
)  # filled by `manage.py collectstatic` for deployments
# Serve straight from static/ too, so a run with DEBUG off works without collectstatic;
# until collectstatic has run, WhiteNoise's warning about the missing folder is noise.
WHITENOISE_USE_FINDERS = True
warnings.filterwarnings("ignore", message=r"No directory at: .*staticfiles")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "runs": {"handlers": ["console"], "level": _AGENTUI.log_level},
        "agentui": {"handlers": ["console"], "level": _AGENTUI.log_level},
    },
}
