"""Django admin for notebooks and their trace.

Notebooks and their settings can be edited; everything the agents produced (turns, steps,
messages, events) is shown read-only, because the trace is a record of what happened.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from runs.models import Event, Message, Step, StepEdge, Task, Turn


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable, never added, changed or deleted through the admin."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TurnInline(ReadOnlyInline):
    model = Turn
    fields = (
        "index",
        "input",
        "status",
        "response",
        "created_at",
        "finished_at",
        "deleted_at",
    )
    readonly_fields = fields


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "title",
        "owner",
        "agent",
        "mode",
        "status",
        "last_seq",
        "updated_at",
    )
    list_filter = ("agent", "mode", "status", "created_at")
    search_fields = ("title", "owner__username", "turns__input")
    date_hierarchy = "created_at"
    readonly_fields = (
        "created_at",
        "updated_at",
        "last_seq",
        "memory_length",
        "clock",
        "lease_owner",
        "lease_at",
        "abandon_requested",
    )
    inlines = [TurnInline]
    list_select_related = ("owner",)


class StepInline(ReadOnlyInline):
    model = Step
    fk_name = "turn"
    fields = (
        "step_id",
        "kind",
        "status",
        "input",
        "output",
        "is_last",
        "total_tokens",
        "started_at",
        "ended_at",
    )
    readonly_fields = fields


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "task",
        "index",
        "short_input",
        "status",
        "created_at",
        "finished_at",
        "deleted_at",
    )
    list_filter = ("status", "created_at")
    search_fields = ("input", "response", "engine_id", "task__title")
    list_select_related = ("task",)
    inlines = [StepInline]

    @admin.display(description="input")
    def short_input(self, turn: Turn) -> str:
        return turn.input[:80]


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    list_display = (
        "step_id",
        "task",
        "turn",
        "kind",
        "status",
        "is_last",
        "total_tokens",
        "runs",
        "started_at",
    )
    list_filter = ("kind", "status", "is_last")
    search_fields = ("step_id", "input", "output", "error")
    list_select_related = ("task", "turn")


@admin.register(StepEdge)
class StepEdgeAdmin(ReadOnlyAdmin):
    list_display = ("id", "from_step", "to_step", "next_order", "prev_order")
    search_fields = ("from_step__step_id", "to_step__step_id")
    list_select_related = ("from_step", "to_step")


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "task",
        "position",
        "role",
        "short_content",
        "status",
        "turn",
        "step",
    )
    list_filter = ("role", "status")
    search_fields = ("content", "tool_call_id")
    list_select_related = ("task", "turn", "step")

    @admin.display(description="content")
    def short_content(self, message: Message) -> str:
        return (message.content or "")[:80]


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("task", "seq", "type", "step_id", "at", "created_at")
    list_filter = ("type",)
    search_fields = ("step_id", "type")
    list_select_related = ("task",)
    ordering = ("task", "seq")
