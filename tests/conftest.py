"""Fixtures shared by the whole suite.

Services: tests marked `postgres` run only when the database is PostgreSQL and
tests marked `redis` only when REDIS_URL is set; `make test`'s second pass sets
both. A service that is configured but unusable (or Chromium missing) skips
the test, or fails it when AGENTUI_REQUIRE_SERVICES=1 (as CI does).

    def test_x(require_service, redis_url, scripted_server, artifacts_dir): ...

No test reaches past this machine: a connection to any address but loopback fails the test
that made it (see "Loopback only" below), so a developer's OPENAI_API_KEY or OPENAI_BASE_URL
in the shell can never send a test's prompts to a real model.
"""

from __future__ import annotations

import gc
import ipaddress
import logging
import os
import socket
import threading
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from django.conf import settings

from runs.engine.llms import TRANSPORTS

if TYPE_CHECKING:
    from phoenix_process import PhoenixProcess

    from runs.engine.testing import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS_DIR = Path(
    os.environ.setdefault("AGENTUI_ARTIFACTS", str(ROOT / "test-artifacts"))
)
REQUIRE_SERVICES = os.environ.get("AGENTUI_REQUIRE_SERVICES", "") == "1"
# The rate limits on runs started and forks made (runs.service.quotas) are on outside tests;
# in them, and in the servers they start, they are off unless a test of them turns them on.
os.environ.setdefault("AGENTUI_RUNS_PER_MINUTE", "0")
os.environ.setdefault("AGENTUI_FORKS_PER_MINUTE", "0")

CHROMIUM_PATH = os.environ.get("AGENTUI_CHROMIUM", "/usr/bin/chromium")
# Headless as root in a sandbox with no internet: no sandboxing, no background fetches.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Settings from the developer's shell that must not leak into child processes.
_SERVICE_ENV = (
    "DATABASE_URL",
    "REDIS_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "AGENTUI_MODEL",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "AGENTUI_TEST_DB_NAME",  # make test's services pass names its test database with it
)


def require_service(name: str, reason: str) -> NoReturn:
    """Skip the running test because service `name` is unusable; fail instead in CI."""
    message = f"{name} unavailable: {reason}"
    if REQUIRE_SERVICES:
        pytest.fail(f"{message} (AGENTUI_REQUIRE_SERVICES=1)", pytrace=False)
    pytest.skip(message)


def is_postgres() -> bool:
    """Whether the configured database is PostgreSQL."""
    return "postgresql" in str(settings.DATABASES["default"]["ENGINE"])


def pytest_configure(config: pytest.Config) -> None:
    # Django's settings were read before this module: give them the rate limit set above.
    settings.AGENTUI_RUNS_PER_MINUTE = int(os.environ["AGENTUI_RUNS_PER_MINUTE"])
    from runs.conf import forget

    forget()  # a plain assignment sends no setting_changed: runs.conf.conf() reads it anew


# --- Loopback only ---------------------------------------------------------------
#
# Every client the tests use (the openai SDK over httpx2 or aiohttp, redis-py, urllib, the
# OTLP exporter) opens its connections through socket.socket.connect or connect_ex, asyncio's
# included. A connection to an address that is not loopback is refused before anything is
# sent and noted; the test that made it fails even when the client swallowed the error (the
# SDK turns it into APIConnectionError and may retry). Child processes are kept off the
# developer's settings by `subprocess_env` instead.


class RemoteConnectionRefused(ConnectionRefusedError):
    """A test tried to reach an address off this machine."""


_remote_attempts: list[str] = []
_remote_lock = threading.Lock()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False  # a name: connect would resolve it itself, to anywhere
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def _check_address(sock: socket.socket, address: Any) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # Unix sockets stay on this machine
    host, port = str(address[0]), address[1]
    if _is_loopback(host):
        return
    message = (
        f"a test connected to {host}:{port}, which is not a loopback address: tests talk "
        "only to servers on this machine (the scripted model: runs.engine.testing)"
    )
    with _remote_lock:
        _remote_attempts.append(message)
    raise RemoteConnectionRefused(message)


def _guard(original: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(self: socket.socket, address: Any) -> Any:
        _check_address(self, address)
        return original(self, address)

    guarded.__name__ = original.__name__
    guarded.__doc__ = original.__doc__
    return guarded


socket.socket.connect = _guard(socket.socket.connect)  # type: ignore[method-assign]
socket.socket.connect_ex = _guard(socket.socket.connect_ex)  # type: ignore[method-assign]


def take_remote_attempts() -> list[str]:
    """The refused connections since the last call (and forget them)."""
    with _remote_lock:
        taken = list(_remote_attempts)
        _remote_attempts.clear()
    return taken


@pytest.hookimpl(wrapper=True, specname="pytest_runtest_setup")
def pytest_runtest_setup_remote_guard(item: pytest.Item) -> Generator[None, None, None]:
    take_remote_attempts()  # one test's attempts are not blamed on the next
    return (yield from _fail_on_remote_attempts())


@pytest.hookimpl(wrapper=True, specname="pytest_runtest_call")
def pytest_runtest_call_remote_guard(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _fail_on_remote_attempts())


@pytest.hookimpl(wrapper=True, specname="pytest_runtest_teardown")
def pytest_runtest_teardown_remote_guard(
    item: pytest.Item,
) -> Generator[None, None, None]:
    return (yield from _fail_on_remote_attempts())


def _fail_on_remote_attempts() -> Generator[None, None, None]:
    result = yield
    attempts = take_remote_attempts()
    if attempts:
        pytest.fail("\n".join(dict.fromkeys(attempts)), pytrace=False)
    return result


# --- Markers -------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Before `-m` deselects: a postgres test is a db test and a redis test a ws
    # test, so the services pass (-m "db or ws") always picks them up.
    for item in items:
        if item.get_closest_marker("postgres") and not item.get_closest_marker("db"):
            item.add_marker(pytest.mark.db)
        if item.get_closest_marker("redis") and not item.get_closest_marker("ws"):
            item.add_marker(pytest.mark.ws)
        browser = item.get_closest_marker("browser") is not None
        live = not browser and bool(
            LIVE_FIXTURES & set(getattr(item, "fixturenames", ()))
        )
        if live:
            item.add_marker(pytest.mark.live)
        if not (browser or live or item.get_closest_marker("timeout")):
            # pytest.ini's 300 s is for Chromium and server processes on a loaded machine; a
            # test in this process took at most ~25 s under `-n`: a hang costs a minute
            item.add_marker(pytest.mark.timeout(IN_PROCESS_TIMEOUT_S))
        if _shares_module_fixtures(item) and not item.get_closest_marker("xdist_group"):
            # under `-n --dist loadgroup`, one worker runs the module: its live app, Phoenix or
            # server processes start once, not once per worker
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


# Fixtures that start processes: a server, Phoenix, manage.py or Redis (marks a test `live`)
LIVE_FIXTURES = {"subprocess_env", "phoenix", "live_app"}
IN_PROCESS_TIMEOUT_S = 60


def _shares_module_fixtures(item: pytest.Item) -> bool:
    """Whether `item` uses a fixture kept for its module (or longer) other than pytest's own."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None or getattr(item, "module", None) is None:
        return False
    return any(
        definition.scope in ("module", "package", "class")
        for definitions in info.name2fixturedefs.values()
        for definition in definitions
        if not definition.func.__module__.startswith(("_pytest", "pytest_"))
    )


class UnclosedPools(logging.Handler):
    """Collects aiohttp's complaints about a client session or connector never closed.

    aiohttp makes them when such an object is garbage-collected, through the event loop's
    exception handler (logger ``asyncio``), whichever thread collects it.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(("Unclosed client session", "Unclosed connector")):
            self.found.append(message.splitlines()[0])

    def __enter__(self) -> UnclosedPools:
        logging.getLogger("asyncio").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("asyncio").removeHandler(self)


_POOLS = pytest.StashKey[UnclosedPools]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """After the fixtures of a test that took `llm_transport` (its event loop among them) are
    gone: fail it if it left an HTTP connection pool unclosed."""
    result = yield
    watch = item.stash.get(_POOLS, None)
    if watch is not None:
        del item.stash[_POOLS]
        gc.collect()  # what only a cycle keeps alive is collected now, in this test
        watch.__exit__()
        if watch.found:
            pytest.fail(
                "connection pools left unclosed: " + "; ".join(watch.found),
                pytrace=False,
            )
    return result


def pytest_collection_finish(session: pytest.Session) -> None:
    # The check after a test that took `llm_transport` collects garbage (gc.collect), which
    # with every collected test's parameters to walk took a second; what is alive now is
    # alive for the whole session, so the collector may skip it from here on.
    if any("llm_transport" in getattr(i, "fixturenames", ()) for i in session.items):
        gc.collect()
        gc.freeze()


def pytest_sessionfinish(session: pytest.Session) -> None:
    # what was frozen is collectable again at exit (native extensions report what is not)
    gc.unfreeze()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres") and not is_postgres():
        pytest.skip(
            "needs DATABASE_URL=postgres://... (runs in make test's services pass)"
        )
    if item.get_closest_marker("redis") and not settings.REDIS_URL:
        pytest.skip("needs REDIS_URL (runs in make test's services pass)")


# --- Fixtures --------------------------------------------------------------------


@pytest.fixture(name="require_service")
def require_service_fixture() -> Callable[[str, str], NoReturn]:
    """`require_service(name, reason)`: skip (fail under AGENTUI_REQUIRE_SERVICES=1)."""
    return require_service


@pytest.fixture
def redis_url() -> str:
    """The configured REDIS_URL, after checking that Redis answers."""
    url: str = settings.REDIS_URL
    if not url:
        pytest.skip("needs REDIS_URL (runs in make test's services pass)")
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        require_service("redis", f"{url}: {exc}")
    finally:
        client.close()
    return url


@pytest.fixture
def chromium_path() -> str:
    """Path of Debian's Chromium (AGENTUI_CHROMIUM overrides)."""
    if not os.access(CHROMIUM_PATH, os.X_OK):
        require_service("chromium", f"no {CHROMIUM_PATH} (apt-get install -y chromium)")
    return CHROMIUM_PATH


@pytest.fixture
def chromium_launch_options(chromium_path: str) -> dict[str, Any]:
    """Keyword arguments for Playwright's `chromium.launch(**options)`."""
    return {
        "executable_path": chromium_path,
        "headless": True,
        "args": list(CHROMIUM_ARGS),
    }


@pytest.fixture
def scripted_server() -> Iterator[Callable[..., ScriptedServer]]:
    """Factory `make_server(script=None, **kwargs)`: a started ScriptedServer, stopped after the test."""
    from runs.engine.testing import ScriptedServer

    started: list[ScriptedServer] = []

    def make_server(script: Any = None, **kwargs: Any) -> ScriptedServer:
        server = ScriptedServer(script, **kwargs).start()
        started.append(server)
        return server

    yield make_server
    for server in reversed(started):
        server.stop()


@pytest.fixture(params=TRANSPORTS)
def llm_transport(request: pytest.FixtureRequest) -> str:
    """The model client's transport: the test runs once on each, and fails if it leaves an
    HTTP connection pool unclosed (checked after its event loop has shut down)."""
    gc.collect()  # garbage from earlier tests is theirs
    request.node.stash[_POOLS] = UnclosedPools().__enter__()
    return str(request.param)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixProcess]:
    """Arize Phoenix for the test process, started on first use (skips, or fails under
    AGENTUI_REQUIRE_SERVICES=1, without it). A module using it marks itself
    `pytest.mark.xdist_group("phoenix")`, so that under `-n` one worker starts it."""
    from phoenix_process import PHOENIX, PhoenixProcess

    if not PHOENIX.exists():
        require_service("phoenix", f"no {PHOENIX} (make phoenix installs it)")
    server = PhoenixProcess(tmp_path_factory.mktemp("phoenix")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def artifacts_dir() -> Path:
    """Folder for screenshots and other files a person may look at after a run."""
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS_DIR


@pytest.fixture
def app_env() -> dict[str, str]:
    """Settings a browser module's live app gets in its environment (a module overrides this)."""
    return {}


@pytest.fixture(scope="session")
def subprocess_env() -> Callable[..., dict[str, str]]:
    """Factory `env(**overrides)`: an environment to run python/manage.py in a child process.

    Starts from this process's environment without the service and LLM settings;
    a value of None removes a variable.
    """

    def make_env(**overrides: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SERVICE_ENV}
        env["DJANGO_SETTINGS_MODULE"] = "agentui.settings"
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    return make_env
