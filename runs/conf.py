"""agentui's own settings, every `AGENTUI_*` variable: one typed object, read and checked once.

`from_environ` reads them from the environment at start (agentui/settings.py calls it; a wrong
value stops start-up with one line naming the variable, `ConfError`). agentui/settings.py keeps
each as the Django setting of the same name, so tests change them the usual way
(`override_settings`, pytest-django's `settings`). Code reads them through `conf()`: this object
built from Django's settings, kept until one of them changes. docs/operations.md lists them from
`table()` (`manage.py settings_table --write`), and a test fails when the two differ.

The engine does not read this: the service hands it the values it needs as arguments.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

PREFIX = "AGENTUI_"
UPLOAD_FORM_ROOM = 64 * 1024  # what a multipart form adds around its one file
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# AGENTUI_EVALUATORS' paths: `module.name`, nothing imported here (runs.engine.evals.custom does)
DOTTED_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# With AGENTUI_TURN_WORKERS: the CHANNEL_LAYERS alias of the turn workers' queue, and the
# channel they take actions from (`manage.py runworker --layer turns agentui.actions`)
TURN_LAYER = "turns"
TURN_CHANNEL = "agentui.actions"
# The header links (AGENTUI_NAV) unless settings.py says otherwise
NAV = (
    ("Home", "runs:index"),
    ("Inbox", "runs:inbox"),
    ("New notebook", "runs:notebook_new"),
    ("Traces", "runs:traces"),
    ("Review", "runs:datasets"),
    ("Data", "runs:data"),
    ("Policies", "runs:policies"),
    ("API tokens", "runs:api_tokens"),
)


class ConfError(ValueError):
    """A malformed setting; the message is one line that starts with the variable's name."""


def _setting(default: Any, kind: str, doc: str, shown: str = "", **limits: Any) -> Any:
    """A field: its default, how its text is read (`kind`), what it does, its default as the
    table shows it when that is not the value itself (`shown`), and bounds (`least`, `most`) or
    the values it may take (`choices`, kind "choice")."""
    return dataclasses.field(
        default=default, metadata={"kind": kind, "doc": doc, "shown": shown, **limits}
    )


@dataclass(frozen=True)
class Conf:
    """Every AGENTUI_* setting (the field `lease_stale_s` is `AGENTUI_LEASE_STALE_S`)."""

    # --- the model
    model: str = _setting(
        "",
        "text",
        "The model to call: required with `OPENAI_BASE_URL` (the name your server serves); "
        "with `OPENAI_API_KEY` alone `gpt-4.1-mini`; unset and neither: the offline demo model",
    )
    models: str = _setting(
        "",
        "text",
        "Other models of the same server a person may pick when composing a notebook, "
        "comma-separated (the `AGENTUI_MODEL` one is always offered); unused with the demo model",
    )
    llm_timeout_s: float = _setting(
        60.0, "seconds", "The openai SDK's timeout of one request to the model"
    )
    llm_max_retries: int = _setting(
        2, "count", "How often the openai SDK retries a failed model request"
    )
    llm_first_byte_timeout_s: float = _setting(
        60.0,
        "seconds",
        "A model call that sends nothing before its first byte (retries included) fails after "
        "this long (`llm_error`); 0: no limit of its own",
    )
    llm_chunk_timeout_s: float = _setting(
        30.0,
        "seconds",
        "A streamed model answer that sends nothing for this long between two chunks fails; "
        "0: no limit of its own",
    )
    llm_transport: str = _setting(
        "aiohttp",
        "choice",
        "How the model client talks HTTP: `aiohttp` (the openai SDK's `DefaultAioHttpClient`, "
        "less client CPU per streamed chunk, lower token latency) or `httpx` (the SDK's own "
        "httpx2); both fail, retry and stop alike",
        choices=("aiohttp", "httpx"),
    )
    tool_output_model_chars: int = _setting(
        256 * 1024,
        "count",
        "The most characters of one tool output a model call is given (the rest is left out "
        "and the model told so); 0: no limit",
    )
    # --- reliability
    lease_stale_s: float = _setting(
        30.0,
        "seconds",
        "A notebook's lease not renewed for this long belongs to a dead process",
    )
    lease_sweep_s: float = _setting(
        10.0,
        "seconds",
        "How often every server process looks for steps left running under dead leases "
        "and takes their turns over; 0: never",
    )
    delete_settle_s: float = _setting(
        10.0,
        "seconds",
        "How long deleting a notebook waits for its stopped run to end and give the "
        "notebook's lease back; then its rows go regardless (a late run's writes are refused)",
    )
    deadline_sweep_s: float = _setting(
        5.0,
        "seconds",
        "How often every server process looks for waiting steps whose deadline has passed "
        "(runs.service.deadlines); 0: never",
    )
    turn_workers: str = _setting(
        "0",
        "choice",
        "`1`: web processes hand every action that starts or changes a run (send, approve, "
        "edit, reject, undo, abandon) to turn workers (`manage.py runworker --layer turns "
        "agentui.actions`) through a queue in Redis and only serve sockets; needs `REDIS_URL` "
        '(docs/operations.md, "Turn workers"). `0`: a run runs in the process that took its '
        "action",
        choices=("0", "1"),
    )
    turn_worker_wait_s: float = _setting(
        5.0,
        "seconds",
        "With turn workers: how long a web process waits for a worker to take an action; "
        "then the person is told that none did, and the action is never carried out",
        least=0.1,
    )
    turn_queue_capacity: int = _setting(
        1000,
        "count",
        "With turn workers: the most actions waiting for a worker; one more is refused "
        "with an error",
        least=1,
    )
    broadcast_timeout_s: float = _setting(
        5.0,
        "seconds",
        "The longest one send to the channel layer may take before it counts as failed",
    )
    delta_gather_s: float = _setting(
        0.0,
        "seconds",
        "The least time a stream's tokens gather into one `delta`; never more than 0.05",
        most=0.05,
    )
    gc: str = _setting(
        "tuned",
        "choice",
        "`tuned`: a server process (daphne, a turn worker) freezes what it imported at start "
        "out of the garbage collector's walks and collects its young objects less often, so a "
        "full collection no longer holds every stream for 150-300 ms (agentui/gc_tuning.py); "
        "`default`: Python's own collector settings",
        choices=("tuned", "default"),
    )
    db_conn_max_age_s: float = _setting(
        60.0,
        "seconds",
        "How long a thread keeps its database connection (checked before reuse); 0: closed "
        "after every call",
    )
    # --- tools and data
    mcp_timeout_s: float = _setting(
        30.0,
        "seconds",
        "How long one call of an MCP server's tool may go without a word from its server (no "
        "answer, progress or log message) before it fails with a message (the notebook and "
        "other tools go on); an admin may set another idle timeout per server",
        least=0.1,
    )
    mcp_max_call_s: float = _setting(
        600.0,
        "seconds",
        "The most one call of an MCP server's tool may take even while its server reports "
        "progress (time a question to the person waits is not counted); an admin may set "
        "another hard maximum per server",
        least=0.1,
    )
    mcp_start_timeout_s: float = _setting(
        20.0,
        "seconds",
        "How long an MCP server may take to start and answer its handshake (also for fetching "
        "its tool list in the admin)",
        least=0.1,
    )
    mcp_restart_backoff_s: float = _setting(
        2.0,
        "seconds",
        "A stdio MCP server whose process stopped is started again by the next call of its "
        "tools; one that stops again before a call went through waits this long before its "
        "next restart, twice as long each further time (at most 60 s), and calls meanwhile "
        "fail at once saying when to retry",
        least=0.0,
    )
    mcp_max_part_bytes: int = _setting(
        2 * 1024 * 1024,
        "count",
        "The largest file (embedded blob resource) one MCP tool result may carry to offer as "
        "a download; a larger one is named on the card but not kept (images are capped by "
        "AGENTUI_MAX_IMAGE_BYTES)",
        least=1024,
    )
    mcp_elicitation_timeout_s: float = _setting(
        600.0,
        "seconds",
        "How long an MCP server's question to the person (an elicitation form in the "
        "notebook) waits for an answer; then the server is told `cancel` and the card says "
        "so. The tool call's own timeout does not run meanwhile",
        least=1.0,
    )
    mcp_request_timeout_s: float = _setting(
        600.0,
        "seconds",
        "How long a request another agent makes over agentui's own MCP server (`/mcp/`: "
        "`request_approval`, `ask_person`) waits in the person's inbox; then the call answers "
        "that it timed out, and the inbox drops it",
        least=1.0,
    )
    mcp_max_waiting_requests: int = _setting(
        50,
        "count",
        "The most `/mcp/` requests (`request_approval`, `ask_person`) that may wait in one "
        "person's inbox at once; more are refused with a tool error saying so",
        least=1,
    )
    mcp_request_keepalive_s: float = _setting(
        20.0,
        "seconds",
        "How often a waiting `/mcp/` request tells a client that asked for progress that it "
        "still waits (which also keeps proxies from closing its response stream as idle)",
        least=0.05,
    )
    mcp_request_heartbeat_s: float = _setting(
        5.0,
        "seconds",
        "How often a waiting `/mcp/` request's call renews its row; one not renewed for three "
        "times this (its server process ended) leaves the inbox and is not decided",
        least=0.01,
    )
    mcp_request_poll_s: float = _setting(
        0.25,
        "seconds",
        "How often a waiting `/mcp/` request reads its row for the person's decision (made "
        "in any server process)",
        least=0.01,
    )
    sql_max_rows: int = _setting(
        200, "count", "The most rows of one `sql_query` result the model is given"
    )
    sql_max_bytes: int = _setting(
        256 * 1024,
        "count",
        "About the most bytes of JSON of one `sql_query` result the model is given",
    )
    sql_time_limit_s: float = _setting(
        2.0,
        "seconds",
        "How long one `sql_query` over the sample dataset (SQLite's own work) may take "
        "before it is stopped",
        least=0.1,
    )
    data_dir: str = _setting(
        "",
        "path",
        "Where the sample dataset and each user's uploaded data (`users/<id>.duckdb`) live",
        shown="`.local/data` in the project folder",
    )
    data_max_file_bytes: int = _setting(
        1024**3, "count", "The largest data file (CSV, Parquet, Excel) one may upload"
    )
    data_max_post_bytes: int = _setting(
        32 * 1024**2,
        "count",
        "The largest data file sent whole in one request (`POST /api/v1/data/files`); daphne "
        "holds a request's body in memory, so larger files go in 1 MiB parts "
        "(`/api/v1/data/uploads`, what the Data page does)",
    )
    dataset_import_max_bytes: int = _setting(
        20 * 1024**2,
        "count",
        "The largest CSV or JSONL file of examples imported into a dataset (`POST "
        "/api/v1/datasets/{id}/import`, the dataset page); read whole before anything is stored",
        least=1024,
    )
    evaluators: tuple[str, ...] = _setting(
        (),
        "paths",
        "Custom evaluators of experiments: dotted paths of Python callables "
        "(`myproject.evals.tone`), comma-separated; each is called with the example and what "
        "the rerun did (docs/evaluators.md)",
        shown="none",
    )
    data_part_bytes: int = _setting(
        1024 * 1024,
        "count",
        "The most bytes of one part of a data file sent in parts (`PUT "
        "/api/v1/data/uploads/{id}`); at most `AGENTUI_MAX_BODY_BYTES`",
        least=1,
    )
    data_import_memory: str = _setting(
        "128MB",
        "size",
        "DuckDB's memory for one import of a data file; it spills to "
        "`<data dir>/users/tmp` beyond this",
    )
    data_import_seconds: float = _setting(
        120.0,
        "seconds",
        "How long reading one Excel (.xlsx) file may take (a process of its own, stopped "
        "then); its CPU time is capped the same",
        least=0.1,
    )
    data_max_rows: int = _setting(
        10_000_000, "count", "The most rows a data file may become", least=1
    )
    data_max_cells: int = _setting(
        200_000_000,
        "count",
        "The most cells (rows times columns) a data file may become",
        least=1,
    )
    data_max_expanded_bytes: int = _setting(
        4 * 1024**3,
        "count",
        "The most bytes an Excel or Parquet file may hold once unpacked (its sheet's XML, its "
        "columns uncompressed); checked before it is read",
        least=1,
    )
    data_quota_bytes: int = _setting(
        10 * 1024**3,
        "count",
        "The most bytes one person's data tables may take on disk (their DuckDB database); an "
        "upload past it is refused and removed",
        least=1,
    )
    data_query_memory_bytes: int = _setting(
        1024**3,
        "count",
        "The memory of the process one `data_query` runs in (its data segment; DuckDB gets "
        "half as its `memory_limit`): past it the query fails as out of memory",
        least=256 * 1024**2,
    )
    data_query_time_limit_s: float = _setting(
        5.0,
        "seconds",
        "How long one `data_query` (or the Data page's preview) may run in its process "
        "before it is killed; its start is allowed 1 s more",
        least=0.1,
    )
    data_busy_wait_s: float = _setting(
        10.0,
        "seconds",
        "How long a use of a person's data (a query, a listing) waits for another one in "
        "this process (an import holds it while it runs) or in another process, before it "
        "is told the data is busy",
    )
    max_image_bytes: int = _setting(
        5 * 1024 * 1024,
        "count",
        "The largest image one may attach to a message",
        least=1024,
    )
    # --- what one request may cost
    max_body_bytes: int = _setting(
        2 * 1024 * 1024,
        "count",
        "The largest request body (larger: 413 before it is read), but on the upload paths",
        least=64 * 1024,
    )
    max_upload_body_bytes: int = _setting(
        5 * 1024 * 1024 + UPLOAD_FORM_ROOM,
        "count",
        "The largest body of an image upload (`POST /api/images/`): more than "
        "`AGENTUI_MAX_IMAGE_BYTES`, room for the form around the image",
        shown="the larger of `AGENTUI_MAX_BODY_BYTES` and `AGENTUI_MAX_IMAGE_BYTES` + 64 KiB",
    )
    csv_export_max_rows: int = _setting(
        1_000_000,
        "count",
        "The most rows of a tool call's table downloaded as CSV",
        least=1,
    )
    csv_export_max_bytes: int = _setting(
        64 * 1024 * 1024,
        "count",
        "The most bytes of a tool call's table downloaded as CSV",
        least=1024,
    )
    csv_export_time_limit_s: float = _setting(
        30.0,
        "seconds",
        "How much of SQLite's own time the query of a tool call's table downloaded as CSV "
        "may take (a slow download does not spend it)",
        least=0.1,
    )
    streams_per_user: int = _setting(
        8,
        "count",
        "How many REST event streams (`GET /api/v1/notebooks/{id}/stream`) one person may "
        "hold open in one server process; one more is refused with 429",
        least=1,
    )
    sockets_per_user: int = _setting(
        64,
        "count",
        "How many websockets (a notebook page has one, every page's inbox count one) one "
        "person may hold open in one server process; one more is closed with code 4429 and "
        "the page tries again later",
        least=1,
    )
    stream_max_s: float = _setting(
        3600.0,
        "seconds",
        "A REST event stream closes after this long; the client reconnects with "
        "`Last-Event-ID` and goes on where it was",
        least=1,
    )
    ws_unread_timeout_s: float = _setting(
        30.0,
        "seconds",
        "A websocket client that has more than 64 KiB of its output unread is sent nothing "
        "more (and not read from) until it reads it; one that reads nothing for this long "
        "is disconnected",
        least=1,
    )
    # --- budgets (runs.service.budgets): past one, the run waits for the person
    budget_run_usd: float = _setting(
        0.0,
        "usd",
        "What one run (the steps answering one message) may spend on model calls, in US "
        "dollars at the model's price (Model prices in the admin), before it waits for the "
        "person to approve going on; a notebook may set its own; 0: no budget",
        shown="0 (none)",
    )
    budget_run_tokens: int = _setting(
        0,
        "count",
        "The same in tokens (prompt + completion), for models without a price; 0: no budget",
        shown="0 (none)",
    )
    budget_user_day_usd: float = _setting(
        0.0,
        "usd",
        "What one person's runs may spend in a UTC day, in US dollars, before the next "
        "model call waits for them; 0: no budget",
        shown="0 (none)",
    )
    budget_user_day_tokens: int = _setting(
        0,
        "count",
        "The same in tokens; 0: no budget",
        shown="0 (none)",
    )
    # --- waiting for the person (the inbox, deadlines, notifications)
    wait_deadline_s: float = _setting(
        0.0,
        "seconds",
        "How long a step may wait for the person before its deadline's action is taken, "
        "unless a notebook sets its own; 0: no deadline",
    )
    wait_deadline_action: str = _setting(
        "reject",
        "choice",
        "What a passed deadline does, unless a notebook says: `reject` (a step's tool calls "
        "are rejected with the reason and the model told; a question is answered that nobody "
        "answered; any other step stops the turn) or `stop` (the turn stops)",
        choices=("reject", "stop"),
    )
    public_url: str = _setting(
        "",
        "text",
        "The address people open agentui at, for the links in emails",
        shown="`http://HOST:PORT`",
    )
    wait_email_every_s: float = _setting(
        600.0,
        "seconds",
        "At most one 'waiting for you' email per person within this time (the next one "
        "counts the waits in between); 0: no limit",
    )
    webhook_allow_private: str = _setting(
        "no",
        "choice",
        "`yes` lets webhooks point at loopback, private and other non-global addresses (a "
        "receiver on the server's own network); `no` refuses every address that is not global "
        "(RFC 6890's special ranges, shared `100.64.0.0/10` with its cloud metadata address, "
        "IPv4-mapped, 6to4, NAT64 and Teredo forms), when registered and before each try, so a "
        "person cannot make the server probe it; such a delivery is logged `refused`, without "
        "the host's answer",
        choices=("no", "yes"),
    )
    webhook_attempts: int = _setting(
        6,
        "count",
        "How often a webhook delivery is tried before it is marked failed",
        least=1,
    )
    webhook_retry_s: float = _setting(
        10.0,
        "seconds",
        "The wait before a failed webhook delivery's second try; each later wait doubles",
        least=0.1,
    )
    webhook_timeout_s: float = _setting(
        10.0, "seconds", "How long one webhook delivery may take", least=0.1
    )
    webhook_sweep_s: float = _setting(
        2.0,
        "seconds",
        "How often each server process sends the webhook deliveries that are due; 0: only "
        "right after an event (no retries)",
    )
    # --- per-person limits (0 turns one off)
    runs_per_minute: int = _setting(
        60,
        "count",
        "Runs (messages sent and approvals) one person may start a minute, counted across "
        "processes; 0: no limit",
    )
    forks_per_minute: int = _setting(
        10,
        "count",
        "Notebooks one person may fork a minute (a fork copies the whole notebook), counted "
        "across processes; 0: no limit",
    )
    max_forks: int = _setting(
        200,
        "count",
        "Forked notebooks one person may keep (people cannot delete notebooks: an operator "
        "removes them in the admin); 0: no limit",
    )
    max_pending_images: int = _setting(
        12,
        "count",
        "Images one person uploaded and has not sent with a message yet; 0: no limit",
    )
    pending_image_ttl_s: float = _setting(
        3600.0,
        "seconds",
        "How long an unsent upload is kept (older ones are discarded and do not count)",
    )
    max_annotations_per_step: int = _setting(
        50,
        "count",
        "Annotations on one step (or one answer) of a notebook; 0: no limit",
    )
    max_webhooks: int = _setting(
        10, "count", "Webhooks one person may register", least=1
    )
    max_api_tokens: int = _setting(
        20, "count", "API tokens one person has that are not revoked; 0: no limit"
    )
    login_attempts_per_minute: int = _setting(
        10,
        "count",
        "Password checks (`POST /login/`) one client (an IPv4 address, an IPv6 /64) may ask "
        "for a minute, in one server process; one more is answered 429 without checking; "
        "0: no limit",
    )
    # --- operations
    login_link_max_age: int = _setting(
        24 * 3600, "count", "Seconds a printed login link stays valid", least=1
    )
    metrics_token: str = _setting(
        "",
        "text",
        "`/metrics` answers only `Authorization: Bearer <this>`; unset: `/metrics` is off",
    )
    ready_timeout_s: float = _setting(
        2.0,
        "seconds",
        "How long `/readyz` waits for each of the database, the channel layer and the model",
    )
    ready_reuse_s: float = _setting(
        1.0,
        "seconds",
        "`/readyz` requests arriving together share one check; its outcome also answers "
        "those arriving within this long after it ended",
    )
    agui_cors_origins: tuple[str, ...] = _setting(
        (),
        "origins",
        "Other origins whose pages may call `POST /agui/` from a browser (CORS), comma-"
        "separated, e.g. `https://app.example.com,http://localhost:3000`; with an API token "
        "only (no cookies cross-origin)",
        shown="none",
    )
    deployment_name: str = _setting(
        "",
        "text",
        "This deployment's name, the prefix of its trace session ids "
        "(`<name>/notebook-<id>`), so deployments sharing a Phoenix project never mix "
        "notebooks; unset: `agentui-` and 8 hex digits derived from `SECRET_KEY`",
    )
    otel_full_prompt: str = _setting(
        "full",
        "choice",
        "What an LLM span keeps of each model call's messages: `full` (the whole prompt, "
        "for Phoenix's Playground; capped by `AGENTUI_OTEL_PROMPT_MAX_CHARS`) or `new` "
        "(only what is new in that call)",
        choices=("full", "new"),
    )
    otel_prompt_max_chars: int = _setting(
        200_000,
        "count",
        "The most characters of one model call's messages on its LLM span (the latest "
        "kept; the number left out is `agentui.input_omitted`)",
        least=1000,
    )
    otel_project: str = _setting(
        "agentui",
        "text",
        "The Phoenix project spans go to (`openinference.project.name`)",
    )
    log_level: str = _setting(
        "INFO", "level", "The log level of agentui's own loggers (`runs`, `agentui`)"
    )
    test_db_name: str = _setting(
        "",
        "text",
        "Test runs only: the name of the test database (parallel runs on one server)",
    )
    # --- read from the environment under the names `make run` gives them
    host: str = _setting(
        "127.0.0.1",
        "text",
        "Where `make run` serves; with `PORT`, the address of the links in emails when "
        "`AGENTUI_PUBLIC_URL` is unset",
        env="HOST",
    )
    port: str = _setting("8000", "text", "The port `make run` serves on", env="PORT")
    # --- written in Python in settings.py, never read from the environment
    nav: tuple[tuple[str, str], ...] = _setting(
        NAV,
        "python",
        "The header links, (label, URL name) pairs; one whose URL name does not resolve is "
        "left out",
        shown="settings.py",
    )
    presets: Mapping[str, Any] | None = _setting(
        None,
        "python",
        "The agent presets changed, hidden (`None`) or added, by name (runs/presets/catalog.py)",
        shown="settings.py",
    )
    telemetry: Any = _setting(
        None,
        "python",
        "The OpenTelemetry export of runs (a `runs.telemetry.config.TelemetryConfig`), made "
        "from the `OTEL_*` variables in settings.py; unset: no export",
        shown="from `OTEL_*`",
    )


def env_name(field: dataclasses.Field[Any]) -> str:
    """The Django setting that holds the field's value (`AGENTUI_` and its name)."""
    return PREFIX + field.name.upper()


def variable_name(field: dataclasses.Field[Any]) -> str:
    """The environment variable the field is read from (most are `env_name`)."""
    return str(field.metadata.get("env") or env_name(field))


def from_settings_py(field: dataclasses.Field[Any]) -> bool:
    """Whether the field is written in settings.py rather than read from the environment."""
    return bool(field.metadata["kind"] == "python")


def _parse(field: dataclasses.Field[Any], raw: str) -> Any:
    name, meta = variable_name(field), field.metadata
    kind, least, most = meta["kind"], meta.get("least", 0), meta.get("most")
    if kind == "seconds":
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= least):
            raise ConfError(f"{name}: expected seconds (>= {least}), got {raw!r}")
        return seconds if most is None else min(most, seconds)
    if kind == "count":
        try:
            count = int(raw)
        except ValueError:
            try:  # "200.0" was read as 200 before; still is
                number = float(raw)
            except ValueError:
                number = math.nan
            count = int(number) if number.is_integer() else least - 1
        if count < least:
            raise ConfError(f"{name}: expected a whole number >= {least}, got {raw!r}")
        return count
    if kind == "usd":
        try:
            usd = float(raw)
        except ValueError:
            usd = math.nan
        if not (math.isfinite(usd) and usd >= 0):
            raise ConfError(f"{name}: expected US dollars (>= 0), got {raw!r}")
        return usd
    if kind == "size":
        if not re.fullmatch(r"\d+(\.\d+)?\s*(KB|MB|GB|KiB|MiB|GiB)", raw):
            raise ConfError(
                f"{name}: expected a size such as 128MB or 1GB, got {raw!r}"
            )
        return raw
    if kind == "choice":
        choices = meta["choices"]
        choice = raw.lower()
        if choice not in choices:
            raise ConfError(f"{name}: expected {' or '.join(choices)}, got {raw!r}")
        return choice
    if kind == "level":
        level = raw.upper()
        if level not in LOG_LEVELS:
            raise ConfError(
                f"{name}: expected DEBUG, INFO, WARNING or ERROR, got {level!r}"
            )
        return level
    if kind == "origins":
        origins = tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())
        for origin in origins:
            if not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?", origin):
                raise ConfError(
                    f"{name}: expected origins such as https://app.example.com, "
                    f"comma-separated; got {origin!r}"
                )
        return origins
    if kind == "paths":
        paths = tuple(p.strip() for p in raw.split(",") if p.strip())
        for path in paths:
            if not DOTTED_PATH.fullmatch(path):
                raise ConfError(
                    f"{name}: expected dotted paths such as myproject.evals.tone, "
                    f"comma-separated; got {path!r}"
                )
        return paths
    return raw  # text, path


def from_environ(environ: Mapping[str, str], *, base_dir: Path) -> Conf:
    """The settings from `environ` (unset or blank: the default); ConfError if one is malformed.

    `base_dir` (the project folder) gives the defaults that depend on it."""
    values: dict[str, Any] = {}
    for field in fields(Conf):
        if from_settings_py(field):
            continue
        raw = environ.get(variable_name(field), "").strip()
        if raw:
            values[field.name] = _parse(field, raw)
    values.setdefault("data_dir", str(base_dir / ".local" / "data"))
    made = Conf(**values)
    if "max_upload_body_bytes" not in values:
        room = max(made.max_body_bytes, made.max_image_bytes + UPLOAD_FORM_ROOM)
        made = dataclasses.replace(made, max_upload_body_bytes=room)
    if made.data_part_bytes > made.max_body_bytes:
        raise ConfError(
            f"AGENTUI_DATA_PART_BYTES: {made.data_part_bytes} is more than a request body may"
            f" have (AGENTUI_MAX_BODY_BYTES, {made.max_body_bytes})"
        )
    if made.max_upload_body_bytes <= made.max_image_bytes:
        raise ConfError(
            f"AGENTUI_MAX_UPLOAD_BODY_BYTES: {made.max_upload_body_bytes} leaves no room for an"
            f" image of AGENTUI_MAX_IMAGE_BYTES ({made.max_image_bytes}) and its form"
        )
    return made


def as_django_settings(values: Conf) -> dict[str, Any]:
    """{"AGENTUI_LEASE_STALE_S": 30.0, ...}: how agentui/settings.py keeps them."""
    return {env_name(f): getattr(values, f.name) for f in fields(Conf)}


_current: Conf | None = None


def conf() -> Conf:
    """The settings in force: Django's `AGENTUI_*` settings (with any test override) as one
    object. One missing from Django's settings has its default."""
    global _current
    current = _current
    if current is None:
        values: dict[str, Any] = {
            f.name: getattr(settings, env_name(f), f.default) for f in fields(Conf)
        }
        current = _current = Conf(**values)
    return current


def forget(**_: Any) -> None:
    """Build `conf()` again at its next use (a setting changed)."""
    global _current
    _current = None


def _on_setting_changed(setting: str, **kwargs: Any) -> None:
    if setting.startswith(PREFIX):
        forget()


setting_changed.connect(_on_setting_changed, dispatch_uid="runs.conf")


def table() -> str:
    """docs/operations.md's table of every setting, as Markdown."""
    rows = [
        "| Variable | Default | What it sets |",
        "|---|---|---|",
    ]
    for field in fields(Conf):
        shown = field.metadata["shown"] or _shown(field.default, field.metadata["kind"])
        rows.append(f"| `{variable_name(field)}` | {shown} | {field.metadata['doc']} |")
    return "\n".join(rows) + "\n"


def _shown(default: Any, kind: str) -> str:
    if default == "":
        return "unset"
    if kind == "seconds":
        return f"{default:g} s"
    if kind == "count" and isinstance(default, int):
        return f"{default:,}"
    return f"`{default}`"
