"""A notebook's own rows: the replayable log of what agents did and what people decided.

A `Task` is a notebook: one conversation with one agent preset. Every message the person sends
starts a `Turn` (one engine task); its `Step`s, the `StepEdge`s between them, the `Message`s of
the agent's memory and the `Event` trace all hang off it. Undo and abandon only mark rows, so
the trace keeps what happened; deleting a notebook (its owner's choice, runs.service.deletion)
removes all of its rows and leaves a `DeletedNotebook` record (runs/models/deletion.py) saying
who deleted what, when.

Source of truth, for `runs.store.DjangoStateStore`: steps, edges and messages are rebuilt from
these rows; only what the engine must get back byte for byte (a step's undo checkpoint, a turn's
worker `extra_state`) is kept as JSON. Every other model module may point at these rows; this
one imports none of them.
"""

from __future__ import annotations

from django.conf import settings
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
