"""The notebook's rows: the replayable log of what agents did and what people decided.

A `Task` is a notebook: one conversation with one agent preset. Every message the person sends
starts a `Turn` (one engine task); its `Step`s, the `StepEdge`s between them, the `Message`s of
the agent's memory and the `Event` trace all hang off it. Undo and abandon only mark rows, so
the trace keeps what happened; deleting a notebook (its owner's choice, runs.service.deletion)
removes all of its rows and leaves a `DeletedNotebook` record saying who deleted what, when.

Source of truth, for `runs.store.DjangoStateStore`: steps, edges and messages are rebuilt from
these rows; only what the engine must get back byte for byte (a step's undo checkpoint, a turn's
worker `extra_state`) is kept as JSON.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from runs.engine import StepKind, StepStatus
from runs.engine import TaskStatus as EngineTaskStatus


class ApprovalMode(models.TextChoices):
    """How much a person approves: nothing, every step, or only steps that run tools."""

    AUTO = "auto", "Run steps back to back"
    STEP = "step", "Approve every step"
    TOOLS = "tools", "Approve tool calls"


class NotebookStatus(models.TextChoices):
    """A summary of the notebook's active turn, recomputed from its steps after every change."""

    IDLE = "idle", "Idle"  # no active turn: ready for a message
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting for you"
    FAILED = "failed", "Step failed"
    INTERRUPTED = "interrupted", "Interrupted"


class DeadlineAction(models.TextChoices):
    """What happens when a waiting step's deadline passes (approving needs an approval policy)."""

    REJECT = "reject", "Reject (the model is told why)"
    STOP = "stop", "Stop the turn"


class TurnStatus(models.TextChoices):
    ACTIVE = EngineTaskStatus.ACTIVE.value, "Active"
    COMPLETED = EngineTaskStatus.COMPLETED.value, "Completed"
    ABANDONED = EngineTaskStatus.ABANDONED.value, "Abandoned"


class StepStatusChoices(models.TextChoices):
    """The engine's StepStatus; `undone` = undone and queued again, or dropped by an undo."""

    PENDING = StepStatus.PENDING.value, "Pending"
    RUNNING = StepStatus.RUNNING.value, "Running"
    COMPLETED = StepStatus.COMPLETED.value, "Completed"
    FAILED = StepStatus.FAILED.value, "Failed"
    UNDONE = StepStatus.UNDONE.value, "Undone"
    INTERRUPTED = StepStatus.INTERRUPTED.value, "Interrupted"


class StepKindChoices(models.TextChoices):
    LLM = StepKind.LLM.value, "Model turn"
    TOOL_CALLS = StepKind.TOOL_CALLS.value, "Tool calls"
    PLAN = StepKind.PLAN.value, "Plan"


class MessageStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    UNDONE = (
        "undone",
        "Undone",
    )  # its step was undone: gone from its turn and the conversation
    # Replaced in the conversation by a different agent memory (a seeded history, a reset);
    # still part of its own turn's memory.
    SUPERSEDED = "superseded", "Superseded"


class Task(models.Model):
    """A notebook: one conversation between its owner and one agent preset."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notebooks"
    )
    title = models.CharField(max_length=200, blank=True)
    agent = models.CharField(
        max_length=64, help_text="agent preset name (runs.presets)"
    )
    mode = models.CharField(
        max_length=8, choices=ApprovalMode.choices, default=ApprovalMode.AUTO
    )
    status = models.CharField(
        max_length=12, choices=NotebookStatus.choices, default=NotebookStatus.IDLE
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The last Event.seq handed out; bumped under a row lock so seqs stay contiguous.
    last_seq = models.PositiveIntegerField(default=0)
    # The agent's memory is the first `memory_length` messages of the conversation.
    memory_length = models.PositiveIntegerField(default=0)
    # A logical clock, ticked by every state-store write: messages and turns record when they
    # came and went, so a turn's history is "the conversation as it was when the turn began".
    clock = models.PositiveBigIntegerField(default=0)
    # Who may change the engine state right now (runs.service.lease); "" when nobody.
    lease_owner = models.CharField(max_length=64, blank=True, default="")
    lease_at = models.DateTimeField(null=True, blank=True)
    # Set by `abandon` while a step runs: the driver abandons the turn after that step.
    abandon_requested = models.BooleanField(default=False)
    # The AG-UI threadId of a notebook started over AG-UI (runs.agui); its runs continue it.
    # Unique per owner: another person's thread of the same id is another notebook.
    agui_thread = models.CharField(max_length=200, null=True, blank=True)
    # A fork (runs.store.fork) starts as `forked_from` stood right after one of its steps:
    # the step's id there, its turn's index and its number among that turn's steps.
    forked_from = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="forks"
    )
    fork_step_id = models.CharField(max_length=64, blank=True, default="")
    fork_turn_index = models.PositiveIntegerField(null=True, blank=True)
    fork_step_number = models.PositiveIntegerField(null=True, blank=True)
    # A waiting step's deadline (runs.service.deadlines): seconds it may wait (None: the
    # AGENTUI_WAIT_DEADLINE_S default; 0: no deadline) and what happens then ("": the default).
    wait_deadline_s = models.PositiveIntegerField(null=True, blank=True)
    wait_deadline_action = models.CharField(
        max_length=8, choices=DeadlineAction.choices, blank=True, default=""
    )
    # What one run (turn) may spend on model calls before it waits for the person
    # (runs.service.budgets): None, the AGENTUI_BUDGET_RUN_* default; 0, no budget.
    budget_run_usd = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    budget_run_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The MCP tools picked for this notebook, by the name the model sees (`server__tool`);
    # offered besides the preset's own tools while the owner may still use their server.
    mcp_tools = models.JSONField(default=list, blank=True)
    # A composed notebook (runs.presets.compose): the model it talks to ("" = the configured
    # one), the preset's built-in tools it keeps (None = all of them) and the person's data
    # tables its data tools may read (None = every one of them).
    model = models.CharField(max_length=100, blank=True, default="")
    tools = models.JSONField(null=True, blank=True, default=None)
    data_tables = models.JSONField(null=True, blank=True, default=None)

    class Meta:
        verbose_name = "notebook"
        ordering = ["-updated_at", "-pk"]
        permissions = [
            (
                "review_group",
                "Can decide the waiting steps of the notebooks of people in their groups",
            )
        ]
        indexes = [models.Index(fields=["owner", "-updated_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "agui_thread"], name="task_agui_thread_per_owner"
            )
        ]

    def __str__(self) -> str:
        return self.title or f"Notebook {self.pk}"

    @property
    def group_name(self) -> str:
        """The channel-layer group every socket watching this notebook joins."""
        return group_name(self.pk)


def group_name(task_pk: int) -> str:
    """The channel-layer group of notebook `task_pk`."""
    return f"task_{task_pk}"


def inbox_group_name(user_pk: int) -> str:
    """The channel-layer group of a person's inbox: told when a notebook of theirs starts or
    stops waiting (runs.service.inbox)."""
    return f"inbox_{user_pk}"


class Turn(models.Model):
    """One engine task: the person's message and the steps the agent took to answer it."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="turns")
    engine_id = models.CharField(
        max_length=64, unique=True, help_text="the engine's task_id"
    )
    index = models.PositiveIntegerField(help_text="1 for the notebook's first turn")
    input = models.TextField()
    status = models.CharField(
        max_length=12, choices=TurnStatus.choices, default=TurnStatus.ACTIVE
    )
    response = models.TextField(null=True, blank=True)
    # Written once at creation and then only by set_mode (never by the store), so a mode change
    # made while a step runs is not overwritten when that step saves.
    approve_tool_calls = models.BooleanField(default=False)
    history_length = models.PositiveIntegerField(default=0)
    token_limit = models.PositiveIntegerField()
    extra_state = models.JSONField(default=dict, blank=True)
    born = models.PositiveBigIntegerField(
        default=0, help_text="Task.clock when created"
    )
    deleted_clock = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Task.clock when abandoned"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(
        null=True, blank=True, help_text="set when abandoned"
    )

    class Meta:
        ordering = ["task", "index"]
        constraints = [
            models.UniqueConstraint(fields=["task", "index"], name="turn_index_unique")
        ]

    def __str__(self) -> str:
        return f"Turn {self.index} of notebook {self.task_id}"


class Step(models.Model):
    """One step of a turn, as the engine's TaskStep plus what running it produced."""

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="steps")
    # Denormalised (never changes) so "is anything running in this notebook" is one indexed query.
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="steps")
    step_id = models.CharField(max_length=64, unique=True)
    kind = models.CharField(
        max_length=16, choices=StepKindChoices.choices, default=StepKind.LLM.value
    )
    original_input = models.TextField(
        null=True, blank=True, help_text="the input as the step was created"
    )
    input = models.TextField(
        null=True, blank=True, help_text="the input as it runs (after edits)"
    )
    status = models.CharField(
        max_length=12,
        choices=StepStatusChoices.choices,
        default=StepStatus.PENDING.value,
    )
    step_state = models.JSONField(default=dict, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    is_ready = models.BooleanField(default=True)
    # Position in the turn's queue of upcoming steps; None when not queued.
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    # Order among the turn's completed steps; None unless completed.
    completion_index = models.PositiveIntegerField(null=True, blank=True)
    output = models.TextField(blank=True, default="")
    sources = models.JSONField(default=list, blank=True)
    is_last = models.BooleanField(default=False)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The engine's Checkpoint taken just before the step ran; undo restores it exactly.
    checkpoint = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # The text streamed so far (flushed every ~200 ms), for sockets that connect mid-stream.
    stream_text = models.TextField(blank=True, default="")
    stream_phase = models.CharField(max_length=32, blank=True, default="")
    runs = models.PositiveIntegerField(
        default=0, help_text="how many times the step was started"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["turn", "created_at", "pk"]
        indexes = [models.Index(fields=["task", "status"])]

    def __str__(self) -> str:
        return f"{self.kind} step {self.step_id[:8]} ({self.status})"


class StepEdge(models.Model):
    """A DAG edge between two steps of a turn; its orders say where it sits in each step's list."""

    from_step = models.ForeignKey(
        Step, on_delete=models.CASCADE, related_name="out_edges"
    )
    to_step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="in_edges")
    # Index in from_step's next_steps / to_step's prev_steps; None when that list lacks the edge.
    # An edge with both None is history (dropped by undo).
    next_order = models.PositiveIntegerField(null=True, blank=True)
    prev_order = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["from_step", "to_step"], name="step_edge_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.from_step.step_id[:8]} -> {self.to_step.step_id[:8]}"


class Message(models.Model):
    """A message of the agent's memory, at its position in the notebook's conversation."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="messages")
    turn = models.ForeignKey(
        Turn, on_delete=models.CASCADE, null=True, blank=True, related_name="messages"
    )
    step = models.ForeignKey(
        Step, on_delete=models.SET_NULL, null=True, blank=True, related_name="messages"
    )
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16)
    content = models.TextField(null=True, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=128, null=True, blank=True)
    name = models.CharField(max_length=128, null=True, blank=True)
    images = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=12, choices=MessageStatus.choices, default=MessageStatus.ACTIVE
    )
    # Task.clock when the message joined / left the conversation (None: still in it).
    born = models.PositiveBigIntegerField(default=0)
    died = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "position", "pk"]
        indexes = [models.Index(fields=["task", "status", "position"])]

    def __str__(self) -> str:
        return f"{self.role} #{self.position} ({self.status})"


class Event(models.Model):
    """One stored event of the trace; `seq` is contiguous per notebook, from 1."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    turn = models.ForeignKey(
        Turn, on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
    )
    step_id = models.CharField(max_length=64, null=True, blank=True, db_index=True)
    type = models.CharField(max_length=32)
    payload = models.JSONField()
    at = models.FloatField(help_text="epoch seconds, from the event")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["task", "seq"], name="event_seq_unique")
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"


class Attachment(models.Model):
    """An image a person attached to a message, kept in the database with it.

    Uploaded before the message is sent (the composer shows a thumbnail), then bound to the
    notebook and the turn the message started. The bytes live here, not on a path, so a restart
    or a second server still has them.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="attachments"
    )
    task = models.ForeignKey(
        Task,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="attachments",
    )
    turn_engine_id = models.CharField(max_length=64, blank=True, default="")
    name = models.CharField(max_length=255, blank=True, default="")
    mime = models.CharField(max_length=32)
    size = models.PositiveIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.name or f"image {self.pk}"


class AnnotationTarget(models.TextChoices):
    STEP = "step", "Step"
    CALL = "call", "Tool call"
    ANSWER = "answer", "Answer"


class Annotation(models.Model):
    """A reviewer's comment and thumbs up/down on a step, a tool call or a turn's answer."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="annotations")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="annotations"
    )
    target = models.CharField(max_length=8, choices=AnnotationTarget.choices)
    turn_id = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="the turn's engine id (answers)",
    )
    step_id = models.CharField(max_length=64, blank=True, default="")
    tool_id = models.CharField(max_length=128, blank=True, default="")
    rating = models.SmallIntegerField(
        default=0, help_text="1 thumbs up, -1 thumbs down, 0 none"
    )
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.target} annotation on notebook {self.task_id}"


class ApiToken(models.Model):
    """A person's key for scripts (`Authorization: Bearer <token>`, runs.service.tokens).

    Only the SHA-256 of the token is kept: it is shown once, when created, and cannot be read
    back. Revoking keeps the row, so the settings page still tells what was revoked and when.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The first characters of the token, shown so a person can tell their tokens apart.
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256, hex")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token"
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class MinuteCount(models.Model):
    """How many of one kind of action a person took in their current minute: the per-minute
    limit's count (runs.service.quotas) when no Redis is configured (or Redis does not answer),
    shared by every server process through the database. A person's minute starts at the first
    action after the previous minute ended, so one row per person."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    window_start = models.FloatField(help_text="epoch seconds: when this minute began")
    count = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True


class RunCount(MinuteCount):
    """Runs (turns and approvals) a person started in their current minute."""

    def __str__(self) -> str:
        return f"{self.count} runs of user {self.user_id} since {self.window_start}"


class ForkCount(MinuteCount):
    """Forks a person made in their current minute."""

    def __str__(self) -> str:
        return f"{self.count} forks of user {self.user_id} since {self.window_start}"


class InboxSettings(models.Model):
    """A person's choices about being told that a step waits, and the email rate limit's state."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="inbox_settings",
    )
    email_on_wait = models.BooleanField(default=False)
    # When the last "waiting for you" email went out, and the waits since that it did not name
    last_email_at = models.DateTimeField(null=True, blank=True)
    unsent_waits = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name_plural = "inbox settings"

    def __str__(self) -> str:
        return f"inbox settings of user {self.user_id}"


class McpTransport(models.TextChoices):
    STDIO = "stdio", "Command (stdio)"
    HTTP = "http", "URL (streamable HTTP)"


class McpServer(models.Model):
    """A Model Context Protocol server an admin configured; its tools can be picked per notebook.

    `tools` is the server's tool listing as last fetched (runs.presets.mcp.listing), already
    checked: names fit the OpenAI function-name pattern, descriptions and schemas are capped.
    Notebooks offer these to the model without starting the server; it starts on the first call.
    """

    name = models.CharField(
        max_length=20,
        unique=True,
        validators=[
            RegexValidator(
                r"^[a-z][a-z0-9_]{0,19}$",
                "a lower-case letter, then lower-case letters, digits or _",
            )
        ],
        help_text="Short name, the prefix of its tools' names (`time` gives `time__get_current_time`): "
        "a lower-case letter, then letters, digits or _",
    )
    description = models.CharField(max_length=300, blank=True)
    transport = models.CharField(
        max_length=8, choices=McpTransport.choices, default=McpTransport.STDIO
    )
    command = models.CharField(
        max_length=500, blank=True, help_text="stdio: the program to run"
    )
    args = models.JSONField(
        default=list,
        blank=True,
        help_text='stdio: its arguments, a JSON list ["--flag", "value"]',
    )
    env = models.JSONField(
        default=dict,
        blank=True,
        help_text='stdio: extra environment variables, a JSON object {"NAME": "value"}',
    )
    url = models.URLField(
        max_length=500, blank=True, help_text="streamable HTTP: the endpoint URL"
    )
    headers = models.JSONField(
        default=dict,
        blank=True,
        help_text='streamable HTTP: request headers, a JSON object {"Authorization": "Bearer …"}',
    )
    enabled = models.BooleanField(default=True)
    everyone = models.BooleanField(
        default=False,
        help_text="Every user may pick its tools (else only those granted)",
    )
    users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="mcp_servers"
    )
    groups = models.ManyToManyField(
        "auth.Group", blank=True, related_name="mcp_servers"
    )
    tools = models.JSONField(default=list, blank=True, editable=False)
    tools_note = models.TextField(
        blank=True, default="", editable=False, help_text="what the last fetch said"
    )
    tools_fetched_at = models.DateTimeField(null=True, blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "MCP server"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class DataSourceKind(models.TextChoices):
    POSTGRES = "postgres", "PostgreSQL (psycopg)"
    MYSQL = "mysql", "MySQL / MariaDB (PyMySQL)"


class DataSource(models.Model):
    """A database an admin registered for the analysts to read (runs.presets.tools.dbsource):
    PostgreSQL or MySQL / MariaDB, as the URL's scheme says (`kind` follows it).

    `url` holds the password: it is a secret, shown back only masked (`masked_url`) on every
    page, REST answer, span and audit row. Queries run in a READ ONLY transaction with the
    source's `timeout_s` as the session's statement timeout, reading at most the SQL tool's row
    cap through a server-side (or unbuffered) cursor; the user in the URL should itself be
    read-only.
    """

    name = models.CharField(
        max_length=30,
        unique=True,
        validators=[
            RegexValidator(
                r"^[a-z][a-z0-9_]{0,29}$",
                "a lower-case letter, then lower-case letters, digits or _",
            )
        ],
        help_text="Short name the model and the Data page use (`warehouse`)",
    )
    description = models.CharField(
        max_length=300, blank=True, help_text="What it holds, told to the model"
    )
    kind = models.CharField(
        max_length=12, choices=DataSourceKind.choices, default=DataSourceKind.POSTGRES
    )
    url = models.CharField(
        max_length=500,
        help_text="postgresql://role:password@host:5432/database or"
        " mysql://user:password@host:3306/database (a read-only user)",
    )
    timeout_s = models.FloatField(
        default=5.0, help_text="statement_timeout of every query, in seconds"
    )
    enabled = models.BooleanField(default=True)
    everyone = models.BooleanField(
        default=False, help_text="Every user may query it (else only those granted)"
    )
    users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="data_sources"
    )
    groups = models.ManyToManyField(
        "auth.Group", blank=True, related_name="data_sources"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "database source"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class PolicyDecision(models.TextChoices):
    """What an approval policy decides for a matching tool call (runs.service.policies)."""

    ASK = "ask", "Always ask"
    ASK_ONCE = "ask_once", "Ask once per notebook"
    ALLOW = "allow", "Never ask (allowed)"
    REFUSE = "refuse", "Never allowed (refused)"


class ToolPolicy(models.Model):
    """An approval rule for the calls of one tool: who it applies to, what it decides, and when
    the call's arguments match (`condition`, see runs/service/policies/match.py).

    Its scope is the one field set among `notebook` (this notebook), `owner` (all of a person's
    notebooks), `preset` and `group` (an admin's defaults); none of them: everyone's default.
    Revoking keeps the row, so the audit's "approved by rule #3" still names what rule 3 was.
    """

    tool = models.CharField(
        max_length=128, help_text="the tool's name, as the model calls it"
    )
    decision = models.CharField(max_length=16, choices=PolicyDecision.choices)
    condition = models.CharField(
        max_length=500,
        blank=True,
        help_text="optional: path=value clauses joined by ' and ' "
        "(e.g. database=sample); the rule applies only to calls whose arguments match",
    )
    reason = models.CharField(
        max_length=500, blank=True, help_text="for a refusal: what the model is told"
    )
    notebook = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.CASCADE, related_name="policies"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tool_policies",
    )
    preset = models.CharField(
        max_length=64, blank=True, help_text="admin default for notebooks of this agent"
    )
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="tool_policies",
        help_text="admin default for the notebooks of this group's members",
    )
    set_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=150, blank=True)

    class Meta:
        verbose_name = "tool approval policy"
        verbose_name_plural = "tool approval policies"
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["tool", "revoked_at"])]

    def __str__(self) -> str:
        return f"rule #{self.pk}: {self.get_decision_display()} {self.tool}"


class WebhookEvent(models.TextChoices):
    """What a webhook may be told of: a notebook's status changing into one of these."""

    WAITING = "step.waiting", "A step waits for a person"
    FINISHED = "turn.finished", "A turn finished"
    FAILED = "turn.failed", "A step failed"
    STOPPED = "turn.stopped", "A turn was stopped or interrupted"


class Webhook(models.Model):
    """A URL that hears about its owner's notebooks (runs.service.webhooks), signed with `secret`."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhooks"
    )
    url = models.URLField(max_length=500)
    events = models.JSONField(default=list, help_text="WebhookEvent values")
    secret = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner", "created_at", "pk"]

    def __str__(self) -> str:
        return self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed"
    # its host resolved to an address a webhook may not reach: nothing sent, never retried
    REFUSED = "refused", "Refused"


class WebhookDelivery(models.Model):
    """One event sent (or being sent) to one webhook: the delivery log its owner sees."""

    webhook = models.ForeignKey(
        Webhook, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=32, choices=WebhookEvent.choices)
    task = models.ForeignKey(Task, on_delete=models.SET_NULL, null=True, blank=True)
    payload = models.JSONField()
    status = models.CharField(
        max_length=12, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # a process sending it holds it until then (several processes never send one twice at once)
    claimed_until = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event} → {self.webhook_id} ({self.status})"


class ModelPrice(models.Model):
    """What a model costs, in US dollars per million tokens, for the cost shown on steps,
    turns and notebooks (edited in the Django admin; a model without a row has no cost)."""

    model = models.CharField(max_length=200, unique=True)
    input_usd_per_million = models.DecimalField(max_digits=12, decimal_places=6)
    output_usd_per_million = models.DecimalField(max_digits=12, decimal_places=6)

    def __str__(self) -> str:
        return self.model


class UserPreset(models.Model):
    """A person's own agent: a composed notebook's settings saved under a name of theirs.

    `config` is a runs.presets.compose.ComposeConfig as JSON (agent, model, tools, MCP tools,
    data tables, mode); it is checked again whenever a notebook starts from it, so a server
    revoked since gives a clear refusal instead of a notebook without the tool.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="presets"
    )
    name = models.CharField(max_length=80)
    config = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "user preset"
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"], name="user_preset_name_per_owner"
            )
        ]

    def __str__(self) -> str:
        return self.name


class DeletedNotebook(models.Model):
    """The audit record of a deleted notebook (runs.service.deletion): who deleted which
    notebook, when, and what it was. Its rows (trace, messages, images) are gone; this row
    stays, so deleting is itself on record, and an open page or a link to the notebook can say
    it was deleted instead of "not found". It also keeps what the notebook's model calls used
    on the day it was deleted, so deleting a notebook does not give its owner's day budget
    back (runs.service.budgets)."""

    notebook_id = models.PositiveBigIntegerField(unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="deleted_notebooks",
    )
    owner_name = models.CharField(max_length=150)
    title = models.CharField(max_length=200, blank=True)
    agent = models.CharField(max_length=64, blank=True)
    deleted_by = models.CharField(max_length=150)
    deleted_at = models.DateTimeField(auto_now_add=True)
    created_at = models.DateTimeField(help_text="when the notebook was created")
    turns = models.PositiveIntegerField(default=0)
    steps = models.PositiveIntegerField(default=0)
    events = models.PositiveIntegerField(default=0)
    # a turn that was going on was stopped first (the Stop path), and whether a step waited
    stopped_turn = models.BooleanField(default=False)
    was_waiting = models.BooleanField(default=False)
    forked_from_id = models.PositiveBigIntegerField(null=True, blank=True)
    forks = models.JSONField(default=list, blank=True, help_text="ids of its forks")
    # the model calls of the deletion's UTC day: {model: [prompt tokens, completion tokens]}
    day_start = models.FloatField(default=0.0, help_text="epoch seconds")
    day_usage = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = "deleted notebook"
        ordering = ["-deleted_at", "-pk"]
        indexes = [models.Index(fields=["owner", "day_start"])]

    def __str__(self) -> str:
        return f"{self.title or f'Notebook {self.notebook_id}'} (deleted)"
