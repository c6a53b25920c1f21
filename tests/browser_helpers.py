"""Live-server and Playwright fixtures for the browser tests.

The app runs as it does under `make run`: daphne in a child process, here on a fresh SQLite
file migrated for this test module, with the scripted OpenAI-compatible server (in this
process, so tests read its request log) as the model. A test module imports the fixtures:

    from browser_helpers import live_app, page, scripted_model  # noqa: F401

and marks its tests `browser`; without Chromium they skip (or fail in CI) through conftest's
`chromium_launch_options` -> `require_service("chromium", ...)`.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, ToolCallSpec

ROOT = Path(__file__).resolve().parent.parent
USERNAME = "analyst"
VIEWPORT = {"width": 1280, "height": 800}
STARTUP_TIMEOUT_S = 30.0
# how long a page waits for an element by default: 15 s was short when `make test -n` runs two
# Chromiums, two servers and their tests on two cores (a page load once took longer)
CONTEXT_TIMEOUT_MS = 30_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Seeder:
    """The live app's seeding process (tests/live_seeder.py): Django booted once, then code and
    management commands run in it on request, one at a time."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "live_seeder"],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._ready = False
        self._lock = threading.Lock()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put("")  # the process ended

    def _reply(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise RuntimeError(
                f"the seeder did not answer within {timeout} s"
            ) from None
        if not line:
            raise RuntimeError(
                "the seeder ended:\n"
                + self.log_path.read_text(errors="replace")[-5000:]
            )
        return dict(json.loads(line))

    def ready(self) -> Seeder:
        if not self._ready:
            self._reply(STARTUP_TIMEOUT_S)
            self._ready = True
        return self

    def ask(self, request: dict[str, Any], timeout: float) -> str:
        with self._lock:
            self.ready()
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            reply = self._reply(timeout)
        if reply["error"]:
            raise RuntimeError(f"{request} failed:\n{reply['out']}\n{reply['error']}")
        return str(reply["out"])

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # its loop ends at the end of its input
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


# Run in a template database once it is migrated: the test user, as `make run`'s ensure_user
# makes it, and a session of theirs, whose cookie every copy of the template accepts.
_TEMPLATE_USER = f"""
from django.contrib.auth import get_user_model
from django.core.management import call_command
from live_support import session_cookie

call_command("ensure_user", "--username", {USERNAME!r})
print(session_cookie(get_user_model().objects.get(username={USERNAME!r})))
"""


@dataclass(frozen=True)
class _Template:
    database: Path
    cookie: str  # `name=value` of a session of the test user


_templates: dict[tuple[str, str], _Template] = {}
_templates_dir: tempfile.TemporaryDirectory[str] | None = None


def copy_migrated_database(env: dict[str, str], target: Path) -> str:
    """Give a live app at `target` a database as `make run` leaves it (migrated, with the test
    user), and return the cookie of a session of that user in it.

    Migrated once per settings module and test process, then copied: a migration costs 5-10 s
    and every seed or login link a Django boot; a copy takes milliseconds."""
    global _templates_dir
    key = (env.get("DJANGO_SETTINGS_MODULE", "agentui.settings"), env["SECRET_KEY"])
    template = _templates.get(key)
    if template is None:
        if _templates_dir is None:
            _templates_dir = tempfile.TemporaryDirectory(prefix="agentui-template-")
        database = Path(_templates_dir.name) / f"{len(_templates)}.sqlite3"
        made = {**env, "DATABASE_URL": f"sqlite:///{database}"}
        out = ""
        for args in (
            ["migrate", "--noinput", "-v", "0"],
            ["shell", "-c", _TEMPLATE_USER],
        ):
            out = subprocess.run(
                [sys.executable, str(ROOT / "manage.py"), *args],
                env=made,
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
                timeout=180,
            ).stdout
        template = _templates[key] = _Template(database, out.strip().splitlines()[-1])
    # SQLite's backup API: a consistent copy whatever the write-ahead log still holds
    with sqlite3.connect(template.database) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    source.close()
    copy.close()
    return template.cookie


class LiveApp:
    """agentui served by daphne on a throwaway database, talking to a scripted model."""

    def __init__(
        self, workdir: Path, model: ScriptedServer, env: dict[str, str]
    ) -> None:
        self.workdir = workdir
        self.model = model
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **env,
            "DATABASE_URL": f"sqlite:///{workdir / 'live.sqlite3'}",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
            "AGENTUI_MODEL": "scripted",
            "SECRET_KEY": "browser-tests-only-" + "x" * 40,
            "DEBUG": env.get("DEBUG", "true"),  # the bench runs it off
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")]
            ).rstrip(os.pathsep),
        }
        self.env.pop("REDIS_URL", None)
        self.log_path = workdir / "daphne.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.seeder: Seeder | None = None  # started by the first seed or command
        self.cookie = (
            ""  # `name=value`: the test user's session, made with the database
        )

    def manage(self, *args: str, timeout: float = 60) -> str:
        """Run `manage.py <args>` in a process of its own against this app's database; returns
        stdout. (`call` runs a command in the seeder instead, without a Django boot.)"""
        result = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
            )
        return result.stdout

    def call(self, *command: str, timeout: float = 60) -> str:
        """A management command run in this app's seeder (as `manage.py <command>`); stdout."""
        return self._seeder().ask({"command": list(command)}, timeout)

    def shell(self, code: str, timeout: float = 120) -> str:
        """Run Python with Django set up (as `manage.py shell -c`), e.g. to seed rows."""
        return self._seeder().ask({"code": code}, timeout)

    def _seeder(self) -> Seeder:
        if self.seeder is None:
            self.seeder = Seeder(self.env, self.workdir / "seeder.log")
        return self.seeder.ready()

    def start(self) -> LiveApp:
        database = self.workdir / "live.sqlite3"
        if not database.exists():
            self.cookie = copy_migrated_database(self.env, database)
        daphne = Path(sys.executable).with_name("daphne")
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                str(daphne),
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "agentui.asgi:application",
            ],
            env=self.env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited at start:\n{self.log()}")
            try:
                urllib.request.urlopen(f"{self.url}/login/", timeout=2).close()
                return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"daphne did not answer within {STARTUP_TIMEOUT_S} s:\n{self.log()}"
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def close(self) -> None:
        """Stop the server and the seeder (the end of the app; `stop` alone lets it restart)."""
        self.stop()
        if self.seeder is not None:
            self.seeder.close()
            self.seeder = None

    def crash(self) -> None:
        """kill -9, as a crash or the kernel's out-of-memory killer does (nothing cleaned up)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except FileNotFoundError:
            return ""

    def login_link(self) -> str:
        """A one-time link that logs the test user in."""
        return self.call("login_link", USERNAME, "--base-url", self.url).strip()

    def session_cookie(self) -> str:
        """A `Cookie` header value of the test user logged in (for raw HTTP and socket clients):
        the session made with the database."""
        return self.cookie

    def seed(self, function: str, *args: object, **kwargs: object) -> str:
        """Call a seed_* function of this module inside the app (its printed result is returned)."""
        params = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        call = f"{function}({', '.join(params)})"
        out = self.shell(f"from browser_helpers import {function}; print({call})")
        return out.strip().splitlines()[-1] if out.strip() else ""

    def api_token(self, name: str = "tests") -> str:
        """A new API token of the test user."""
        return self.shell(
            "from django.contrib.auth import get_user_model; "
            "from runs.service.tokens import create_token; "
            f"user = get_user_model().objects.get(username={USERNAME!r}); "
            f"print(create_token(user, {name!r})[1])"
        ).split()[-1]

    def task_rows(self) -> list[dict[str, Any]]:
        """The notebooks in the database (id, title, status, mode), newest first."""
        out = self.shell(
            "import json; from runs.models import Task; "
            "print(json.dumps(list(Task.objects.order_by('-pk').values('id', 'title', 'status', 'mode', 'agent'))))"
        )
        return list(json.loads(out.strip().splitlines()[-1]))


@contextmanager
def served_app(
    env: dict[str, str], script: Script | None = None, prefix: str = "agentui-live-"
) -> Iterator[LiveApp]:
    """A LiveApp on a throwaway folder with its own scripted model, stopped afterwards."""
    model = ScriptedServer(script or Script()).start()
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        app = LiveApp(Path(workdir), model, env)
        try:
            yield app.start()
        finally:
            app.close()
            model.stop()


class _ModuleState:
    """Things started once per test module and stopped at its end."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.model: ScriptedServer | None = None
        self.app: LiveApp | None = None
        self.playwright: Any = None
        self.browser: Any = None
        self.storage_state: dict[str, Any] | None = None
        self.tmp: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        if (
            self.app is not None
        ):  # the server's log, for a person looking into a failure
            artifacts = Path(
                os.environ.get("AGENTUI_ARTIFACTS", ROOT / "test-artifacts")
            )
            artifacts.mkdir(parents=True, exist_ok=True)
            (artifacts / f"daphne-{self.name}.log").write_text(self.app.log())
        # Playwright's sync API keeps its event loop marked running in this thread while it
        # is started: stopped with the module, so other modules' asyncio tests and ORM calls
        # see no loop
        if self.browser is not None:
            self.browser.close()
        if self.playwright is not None:
            self.playwright.stop()
        if self.app is not None:
            self.app.close()
        if self.model is not None:
            self.model.stop()
        if self.tmp is not None:
            self.tmp.cleanup()


@pytest.fixture(scope="module")
def _browser_module(request: pytest.FixtureRequest) -> Iterator[_ModuleState]:
    state = _ModuleState(request.module.__name__.rsplit(".", 1)[-1])
    yield state
    state.close()


@pytest.fixture
def scripted_model(_browser_module: _ModuleState) -> ScriptedServer:
    """The scripted model the live app talks to; `load()` a script per test."""
    if _browser_module.model is None:
        _browser_module.model = ScriptedServer(Script()).start()
    return _browser_module.model


@pytest.fixture
def live_app(
    _browser_module: _ModuleState,
    scripted_model: ScriptedServer,
    chromium_launch_options: dict[str, Any],
    subprocess_env: Callable[..., dict[str, str]],
    app_env: dict[str, str],
) -> LiveApp:
    """agentui served by daphne for this module (needs Chromium, or the test skips)."""
    state = _browser_module
    if state.app is None:
        state.tmp = tempfile.TemporaryDirectory(prefix="agentui-browser-")
        state.app = LiveApp(
            Path(state.tmp.name), scripted_model, subprocess_env(**app_env)
        ).start()
    if state.browser is None:
        from playwright.sync_api import sync_playwright

        state.playwright = sync_playwright().start()
        state.browser = state.playwright.chromium.launch(**chromium_launch_options)
    return state.app


@pytest.fixture
def new_context(
    _browser_module: _ModuleState, live_app: LiveApp
) -> Iterator[Callable[[], Any]]:
    """Factory for logged-in browser contexts (1280x800); all closed after the test.
    Keyword arguments go to Playwright's new_context, e.g. java_script_enabled=False."""
    state = _browser_module
    contexts: list[Any] = []

    def make(**options: Any) -> Any:
        if (
            state.storage_state is None
        ):  # the test user's session, made with the database
            name, value = live_app.cookie.split("=", 1)
            cookie = {
                "name": name,
                "value": value,
                "domain": "127.0.0.1",
                "path": "/",
                "expires": -1,
                "httpOnly": True,
                "secure": False,
                "sameSite": "Lax",
            }
            state.storage_state = {"cookies": [cookie], "origins": []}
        context = state.browser.new_context(
            viewport=VIEWPORT,
            storage_state=state.storage_state,
            accept_downloads=True,
            **options,
        )
        context.set_default_timeout(CONTEXT_TIMEOUT_MS)
        contexts.append(context)
        return context

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_context: Callable[[], Any]) -> Any:
    """A logged-in page; script errors and failed requests are collected on `page.console_errors`."""
    p = new_context().new_page()
    watch_errors(p)
    return p


def watch_errors(p: Any) -> list[str]:
    """Collect uncaught script errors, console errors and HTTP errors (but the favicon's) of `p`."""
    errors: list[str] = []

    def on_console(msg: Any) -> None:
        # Failed loads are reported by URL below; the console's copy has no URL.
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            errors.append(msg.text)

    def on_response(response: Any) -> None:
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            errors.append(f"HTTP {response.status} {response.url}")

    p.on("console", on_console)
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    p.on("response", on_response)
    p.console_errors = errors
    return errors


def shot(page: Any, artifacts_dir: Path, name: str, *, full_page: bool = False) -> Path:
    """Save a screenshot as test-artifacts/<name>.png."""
    path = artifacts_dir / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


WINDOW_SIZES = (1280, 800), (1920, 1080)


def settle(page: Any) -> None:
    """Wait two frames: the page has laid itself out again (after a resize)."""
    page.evaluate(
        "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    )


def shots_at_both_sizes(page: Any, artifacts_dir: Path, name: str) -> None:
    """Screenshots <name>-1280x800.png and <name>-1920x1080.png; the page ends at 1280x800."""
    for width, height in WINDOW_SIZES:
        page.set_viewport_size({"width": width, "height": height})
        settle(page)
        shot(page, artifacts_dir, f"{name}-{width}x{height}")
    page.set_viewport_size(VIEWPORT)


def confirm_ready(page: Any, form_selector: str) -> None:
    """Wait until the page's script guards the forms of `form_selector` with its confirmation
    (static/js/confirm.js): a click before that would submit without asking."""
    page.locator(f"{form_selector}[data-confirm-ready]").first.wait_for(
        state="attached"
    )


def wait_until(
    check: Callable[[], Any],
    timeout: float = 15.0,
    interval: float = 0.05,
    message: str = "condition",
) -> Any:
    """Poll `check` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


def start_notebook(page: Any, app: LiveApp, text: str, *, agent: str, mode: str) -> int:
    """Start a notebook through the new-notebook form; returns its id once the page is live."""
    page.goto(f"{app.url}/new/")
    page.get_by_label("Message").fill(text)
    page.get_by_label("Agent").select_option(agent)
    return _start(page, mode)


def start_from_example(
    page: Any, app: LiveApp, prompt: str, *, agent: str, mode: str
) -> int:
    """Start a notebook from one of the start page's example prompts (which fills in the form
    with its agent and message); returns its id once the page is live."""
    page.goto(f"{app.url}/")
    page.get_by_role("link", name=prompt).click()
    page.wait_for_url("**/new/**")
    assert page.get_by_label("Agent").input_value() == agent
    assert page.get_by_label("Message").input_value() == prompt
    return _start(page, mode)


def _start(page: Any, mode: str) -> int:
    page.get_by_label("Approval").select_option(mode)
    page.get_by_role("button", name="Start", exact=True).click()
    page.wait_for_url("**/tasks/*/")
    page.wait_for_selector("#connection[data-state='open']")
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def step_cells(page: Any) -> Any:
    return page.locator("article.cell-step")


def call_rule(
    after: int,
    tool: str,
    call_id: str,
    arguments: dict[str, Any],
    text: str | None = None,
) -> Rule:
    """A scripted model turn that calls `tool` once, after `after` tool results since the user."""
    return Rule(
        name=f"{tool}-{call_id}",
        match=Match(tool_results_since_user=after),
        reply=Reply(
            text=text,
            tool_calls=[ToolCallSpec(name=tool, id=call_id, arguments=arguments)],
        ),
    )


def last_user_texts(model: ScriptedServer) -> list[str]:
    return [r.last_user_text for r in model.requests]


# --- seeding the live app's database (run inside it with LiveApp.shell) ---------------------------


def seed_long_trace(
    username: str,
    steps: int,
    calls_per_step: int = 2,
    rows: bool = False,
    *,
    tables: int = 0,
    charts: int = 0,
    markdown: bool = False,
) -> int:
    """A finished notebook of `steps` steps, each a model turn with parallel tool calls.

    Built from the engine's own event classes and stored as Event rows, as the publisher stores
    them; with `rows`, the engine's state too (steps with their undo checkpoints, the
    conversation), as the state store keeps it, so the notebook can be undone or forked.
    Returns the notebook's id. Runs inside the app's process (`manage.py shell -c`).
    With `tables`, that many steps (evenly spread, from the first) call `sql_query` and get a
    200-row result; with `charts`, that many others call `chart` (a 12-bar chart); their other
    calls are `add`/`multiply`. With `markdown`, step texts are Markdown (bold, a list, code).
    """
    import uuid

    from django.contrib.auth import get_user_model

    from runs.engine import (
        AgentInput,
        AgentOutput,
        ChatMessage,
        StepCompleted,
        StepCreated,
        StepStarted,
        TaskCompleted,
        TaskCreated,
        TokenUsage,
        ToolCall,
        ToolCallResult,
        ToolOutput,
        ToolSelection,
    )
    from runs.models import Event, Task, Turn

    question = f"A long analysis in {steps} steps"
    if tables or charts:
        question += ", with tables and charts"
    owner = get_user_model().objects.get(username=username)
    task = Task.objects.create(
        owner=owner, title=question, agent="function_calling", mode="auto"
    )
    turn_id = str(uuid.uuid4())
    turn = Turn.objects.create(
        task=task,
        engine_id=turn_id,
        index=1,
        input=question,
        status="completed",
        response="Done.",
        token_limit=100_000,
    )
    ids = [str(uuid.uuid4()) for _ in range(steps)]
    payloads: list[dict[str, Any]] = []
    clock = time.time() - steps * 0.4
    table_every = steps // tables if tables else 0
    chart_every = steps // charts if charts else 0

    def add(event: Any) -> None:
        payloads.append(event.model_dump(mode="json"))

    def first_call(i: int) -> ToolSelection | None:
        """The table or chart call of step `i`, if it has one."""
        if table_every and i % table_every == 0:
            return ToolSelection(
                tool_id=f"q_{i}",
                tool_name="sql_query",
                tool_kwargs={"sql": f"SELECT {i}"},
            )
        if chart_every and i % chart_every == chart_every // 2:
            return ToolSelection(
                tool_id=f"c_{i}",
                tool_name="chart",
                tool_kwargs={"spec": {"mark": "bar"}},
            )
        return None

    def result_of(i: int, c: int, call: ToolSelection) -> tuple[Any, str]:
        """The raw output of a call and the text the model reads."""
        if call.tool_name == "sql_query":
            rows = [
                [
                    f"City {r}",
                    f"2024-{r % 12 + 1:02d}-01",
                    r % 13,
                    round(r * 17.25 + i, 2),
                ]
                for r in range(200)
            ]
            raw = {
                "columns": ["city", "month", "orders", "revenue"],
                "rows": rows,
                "row_count": 200,
                "truncated": True,
                "total_rows": 1000 + i,
            }
            return raw, json.dumps(raw)
        if call.tool_name == "chart":
            values = [
                {"city": f"City {r}", "revenue": (r * 37 + i) % 100 + 10}
                for r in range(12)
            ]
            spec = {
                "mark": "bar",
                "width": 400,
                "height": 200,
                "data": {"values": values},
                "encoding": {
                    "x": {"field": "city", "type": "nominal"},
                    "y": {"field": "revenue", "type": "quantitative"},
                },
            }
            raw = {"spec": spec, "rows": 12, "data_from_call": None}
            return raw, "Chart drawn for the person: bar chart of 12 data rows."
        return i + c, str(i + c)

    add(TaskCreated(task_id=turn_id, input=question, at=clock))
    for i, step_id in enumerate(ids):
        common: dict[str, Any] = {"task_id": turn_id, "step_id": step_id}
        last = i == steps - 1
        if last:
            text = "Done."
        elif markdown:
            text = (
                f"**Step {i + 1}**: I look at the next slice of the data.\n\n"
                f"- rows so far: {i * 200}\n- running total: `{i * 3.5:.2f}`"
            )
        else:
            text = f"Step {i + 1}: I look at the next slice of the data and compute its totals."
        usage = TokenUsage(
            prompt_tokens=200 + i, completion_tokens=20, total_tokens=220 + i
        )
        calls = (
            []
            if last
            else [
                ToolSelection(
                    tool_id=f"call_{i}_{c}",
                    tool_name="add" if c % 2 == 0 else "multiply",
                    tool_kwargs={"a": i, "b": c},
                )
                for c in range(calls_per_step)
            ]
        )
        special = None if last else first_call(i)
        if special is not None:
            calls[:1] = [special]
        add(
            StepCreated(
                **common,
                input=question if i == 0 else None,
                prev_steps=[ids[i - 1]] if i else [],
                at=clock,
            )
        )
        add(StepStarted(**common, at=clock + 0.005))
        add(AgentInput(**common, input=[ChatMessage.user(question)], at=clock + 0.006))
        add(
            AgentOutput(
                **common,
                response=ChatMessage.assistant(text, tool_calls=tuple(calls)),
                tool_calls=calls,
                usage=usage,
                at=clock + 0.15,
            )
        )
        start = clock + 0.16
        for call in calls:
            add(
                ToolCall(
                    **common,
                    tool_name=call.tool_name,
                    tool_kwargs=call.tool_kwargs,
                    tool_id=call.tool_id,
                    at=start,
                )
            )
        for c, call in enumerate(calls):
            raw, content = result_of(i, c, call)
            output = ToolOutput(
                content=content,
                tool_name=call.tool_name,
                raw_input=call.tool_kwargs,
                raw_output=raw,
            )
            add(
                ToolCallResult(
                    **common,
                    tool_name=call.tool_name,
                    tool_kwargs=call.tool_kwargs,
                    tool_id=call.tool_id,
                    tool_output=output,
                    started_at=start,
                    ended_at=start + 0.05 + 0.03 * c,
                    at=start + 0.05 + 0.03 * c,
                )
            )
        add(
            StepCompleted(
                **common,
                output=text,
                is_last=last,
                next_steps=[] if last else [ids[i + 1]],
                usage=usage,
                at=start + 0.12,
            )
        )
        clock += 0.4
    add(TaskCompleted(task_id=turn_id, response="Done.", at=clock))
    Event.objects.bulk_create(
        [
            Event(
                task=task,
                seq=n,
                turn=turn,
                step_id=p.get("step_id"),
                type=p["type"],
                payload=p,
                at=p["at"],
            )
            for n, p in enumerate(payloads, start=1)
        ],
        batch_size=500,
    )
    Task.objects.filter(pk=task.pk).update(last_seq=len(payloads))
    if rows:
        _store_long_trace_state(task.pk, turn_id, question, payloads)
    return int(task.pk)


def _store_long_trace_state(
    task_pk: int, turn_id: str, question: str, payloads: list[dict[str, Any]]
) -> None:
    """The engine state a run would have left for the events of `seed_long_trace`."""
    from runs.engine import (
        AgentChatResponse,
        ChatMemoryBuffer,
        ChatMessage,
        Checkpoint,
        TaskState,
        TaskStatus,
        TaskStep,
        TaskStepOutput,
        TokenUsage,
        ToolSelection,
    )
    from runs.engine import Task as EngineTask
    from runs.store import save_state
    from runs.store.messages import save_agent_memory

    done = [p for p in payloads if p["type"] == "step_completed"]
    outputs = {p["step_id"]: p for p in payloads if p["type"] == "agent_output"}
    results: dict[str, list[dict[str, Any]]] = {}
    for p in payloads:
        if p["type"] == "tool_call_result":
            results.setdefault(p["step_id"], []).append(p)
    ids = [p["step_id"] for p in done]
    steps = [
        TaskStep(
            task_id=turn_id,
            step_id=step_id,
            input=question if i == 0 else None,
            prev_steps=ids[i - 1 : i],
            next_steps=ids[i + 1 : i + 2],
        )
        for i, step_id in enumerate(ids)
    ]
    memory = [ChatMessage.user(question)]
    completed, checkpoints = [], []
    for i, (step, event) in enumerate(zip(steps, done)):
        checkpoints.append(
            Checkpoint(
                step=step.model_copy(deep=True),
                queue=[step.model_copy(deep=True)],
                memory_length=len(memory),
                extra_state={},
            )
        )
        calls = [
            ToolSelection.model_validate(c) for c in outputs[step.step_id]["tool_calls"]
        ]
        memory.append(ChatMessage.assistant(event["output"], tool_calls=tuple(calls)))
        for result in results.get(step.step_id, []):
            memory.append(
                ChatMessage.tool(
                    result["tool_output"]["content"],
                    result["tool_id"],
                    result["tool_name"],
                )
            )
        completed.append(
            TaskStepOutput(
                output=AgentChatResponse(
                    response=event["output"], usage=TokenUsage(**event["usage"])
                ),
                task_step=step,
                next_steps=steps[i + 1 : i + 2],
                is_last=event["is_last"],
            )
        )
    state = TaskState(
        task=EngineTask(
            task_id=turn_id,
            input=question,
            memory=ChatMemoryBuffer(token_limit=100_000, messages=memory),
        ),
        status=TaskStatus.COMPLETED,
        completed_steps=completed,
        checkpoints=checkpoints,
        response="Done.",
    )
    save_state(task_pk, state)
    save_agent_memory(task_pk, memory)


def seed_filler_notebooks(username: str, count: int, agent: str) -> None:
    """`count` empty notebooks named "Filler notebook <n>" (for paging and filters)."""
    from django.contrib.auth import get_user_model

    from runs.models import Task

    owner = get_user_model().objects.get(username=username)
    Task.objects.bulk_create(
        [
            Task(owner=owner, title=f"Filler notebook {n}", agent=agent)
            for n in range(count)
        ]
    )


# Every text a streamed cell shows, recorded by the page itself on each DOM change, so a wrong
# text that lasts one frame (a token drawn twice, then healed) is still caught.
_RECORD_STREAM_TEXTS = """
(() => {
  const seen = new Set();
  window.__streamTexts = seen;
  const record = () => { for (const el of document.querySelectorAll('.stream-text')) seen.add(el.textContent || ''); };
  const start = () => new MutationObserver(record).observe(document.body, {subtree: true, childList: true, characterData: true});
  if (document.body) start(); else document.addEventListener('DOMContentLoaded', start);
})();
"""


def record_stream_texts(context: Any) -> Callable[[Any], list[str]]:
    """Record, in every page of `context`, each text its streamed cells ever show; returns a reader."""
    context.add_init_script(_RECORD_STREAM_TEXTS)
    return lambda page: list(page.evaluate("() => [...(window.__streamTexts || [])]"))
