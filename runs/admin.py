"""Django admin for notebooks and their trace.

Notebooks and their settings can be edited; everything the agents produced (turns, steps,
messages, events) is shown read-only, because the trace is a record of what happened.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from runs.models import (
    DataSource,
    DeletedNotebook,
    Event,
    ExternalRequest,
    McpServer,
    McpTransport,
    Message,
    ModelPrice,
    Step,
    StepEdge,
    Task,
    ToolPolicy,
    Turn,
    root_uris,
)
from runs.service import (
    ConditionError,
    DbSourceError,
    delete_as_operator,
    masked_source_url,
    mcp_server_health,
    parse_condition,
    refresh_mcp_listing,
    revoke_policies,
    save_default_policy,
    source_kind,
    source_url_problem,
    test_source,
)


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
    # `mode` and `status` change through the service (the notebook's page, REST), which
    # re-gates the running turn and keeps its lease: an operator editing them here would not
    readonly_fields = (
        "mode",
        "status",
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

    # Deleting goes through the service, as the owner's Delete does: a turn going on is
    # stopped, every row goes, open pages are told, and the deletion is on record. After the
    # admin's own transaction: the service's steps each take and give back a connection.
    def delete_model(self, request: HttpRequest, obj: Task) -> None:
        _delete_after_commit(request, [obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        _delete_after_commit(request, list(queryset.values_list("pk", flat=True)))


def _delete_after_commit(request: HttpRequest, pks: list[int]) -> None:
    def delete() -> None:
        for pk in pks:
            async_to_sync(delete_as_operator)(request.user, pk)  # type: ignore[arg-type]

    transaction.on_commit(delete)


@admin.register(DeletedNotebook)
class DeletedNotebookAdmin(ReadOnlyAdmin):
    """The record of each deleted notebook: who deleted which, when (runs.service.deletion)."""

    list_display = (
        "notebook_id",
        "title",
        "owner_name",
        "deleted_by",
        "deleted_at",
        "turns",
        "events",
        "stopped_turn",
    )
    list_filter = ("deleted_at", "agent")
    search_fields = ("title", "owner_name", "deleted_by")
    date_hierarchy = "deleted_at"


@admin.register(ExternalRequest)
class ExternalRequestAdmin(ReadOnlyAdmin):
    """What other agents asked over `/mcp/`, and who decided what (runs.service.external_requests)."""

    list_display = (
        "pk",
        "kind",
        "owner",
        "token_name",
        "client_name",
        "status",
        "decided_by_name",
        "created_at",
        "decided_at",
    )
    list_filter = ("status", "kind", "created_at")
    search_fields = ("description", "token_name", "client_name", "decided_by_name")
    date_hierarchy = "created_at"


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


class McpServerForm(forms.ModelForm):  # type: ignore[type-arg]
    """Refuses a server that cannot be started as configured, saying which field is wrong."""

    url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text="streamable HTTP: the endpoint URL",
    )

    class Meta:
        model = McpServer
        fields = "__all__"
        widgets = {"roots": forms.Textarea(attrs={"rows": 3})}

    def clean_roots(self) -> str:
        """Stored as sent: each path as its file:// URI (the model's validator names bad lines)."""
        text = str(self.cleaned_data.get("roots") or "")
        return "\n".join(root_uris(text))

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        stdio = data.get("transport") == McpTransport.STDIO
        if stdio and not data.get("command"):
            self.add_error("command", "A stdio server needs the program to run.")
        if not stdio and not data.get("url"):
            self.add_error("url", "A streamable HTTP server needs its URL.")
        args = data.get("args")
        if args is not None and (
            not isinstance(args, list) or not all(isinstance(a, str) for a in args)
        ):
            self.add_error(
                "args", 'Give a JSON list of strings, like ["--flag", "value"].'
            )
        for field in ("env", "headers"):
            value = data.get(field)
            if value is not None and (
                not isinstance(value, dict)
                or not all(isinstance(v, str) for v in value.values())
            ):
                self.add_error(
                    field, 'Give a JSON object of strings, like {"NAME": "value"}.'
                )
        if data.get("read_only_unasked") and not data.get("trusted"):
            self.add_error(
                "read_only_unasked",
                "Mark the server trusted first: its hints are its own word otherwise.",
            )
        return data


HINT_WORDS = {
    "readOnlyHint": ("read-only", "not read-only"),
    "destructiveHint": ("destructive", "not destructive"),
    "idempotentHint": ("idempotent", "not idempotent"),
    "openWorldHint": ("open world", "closed world"),
}


def hints_text(tool: dict[str, Any]) -> str:
    """A listed tool's title and the hints its server gave, as the tool list shows them."""
    hints = tool.get("hints") or {}
    said = [HINT_WORDS[k][0 if v else 1] for k, v in hints.items() if k in HINT_WORDS]
    title = f"“{tool['title']}”" if tool.get("title") else ""
    return " ".join([title, f"[{', '.join(said)}]" if said else ""]).strip()


# what a server may hide without saying: it lists no tool that needs a capability we lack
UNDECLARED_NOTE = (
    "agentui declares the elicitation and roots capabilities but not sampling: a server may "
    "leave out of its list the tools that need sampling (or tasks), and does not say which."
)


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Saving a server fetches its tool list; the list and what the fetch said are shown."""

    form = McpServerForm
    list_display = (
        "name",
        "transport",
        "enabled",
        "everyone",
        "trusted",
        "tool_count",
        "tools_fetched_at",
        "state",
        "last_error",
    )
    list_filter = ("enabled", "transport")
    filter_horizontal = ("users", "groups")
    readonly_fields = (
        "state",
        "last_error",
        "tools_note",
        "tools_fetched_at",
        "tool_list",
        "hidden_tools",
    )
    actions = ("fetch_tools",)
    fieldsets = (
        (None, {"fields": ("name", "description", "transport", "enabled")}),
        ("Command (stdio)", {"fields": ("command", "args", "env")}),
        ("URL (streamable HTTP)", {"fields": ("url", "headers")}),
        ("Roots", {"fields": ("roots",)}),
        ("Who may pick its tools", {"fields": ("everyone", "users", "groups")}),
        ("Approval", {"fields": ("trusted", "read_only_unasked")}),
        (
            "Long calls and log messages",
            {"fields": ("idle_timeout_s", "max_call_s", "log_level")},
        ),
        ("In this process", {"fields": ("state", "last_error")}),
        (
            "Tools",
            {"fields": ("tools_note", "tools_fetched_at", "tool_list", "hidden_tools")},
        ),
    )

    @admin.display(description="state")
    def state(self, server: McpServer) -> str:
        return str(mcp_server_health(server).state)

    @admin.display(description="last error")
    def last_error(self, server: McpServer) -> str:
        health = mcp_server_health(server)
        if not health.last_error or health.last_error_at is None:
            return "none"
        # the error quotes the server's own words (its stderr): escaped by format_html
        return format_html(
            "{} <small>({} UTC)</small>",
            Truncator(health.last_error).chars(300),
            health.last_error_at.strftime("%Y-%m-%d %H:%M:%S"),
        )

    @admin.display(description="hidden tools")
    def hidden_tools(self, server: McpServer) -> str:
        refused = format_html_join(
            "",
            "<p><code>{}</code> left out: {}</p>",
            ((t.get("tool", ""), t.get("reason", "")) for t in server.tools_left_out),
        )
        return format_html(
            "{}<p>{}</p>",
            refused or "No listed tool was refused.",
            UNDECLARED_NOTE,
        )

    @admin.display(description="tools")
    def tool_count(self, server: McpServer) -> int:
        return len(server.tools)

    @admin.display(description="tool list")
    def tool_list(self, server: McpServer) -> str:
        # names and descriptions come from the server: escaped by format_html_join
        return (
            format_html_join(
                "",
                "<p><code>{}</code> {} {}</p>",
                (
                    (
                        t["name"],
                        hints_text(t),
                        Truncator(t["description"]).chars(200),
                    )
                    for t in server.tools
                ),
            )
            or "none yet"
        )

    def save_model(
        self, request: HttpRequest, obj: McpServer, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        self._fetch(request, obj)

    def _fetch(self, request: HttpRequest, server: McpServer) -> None:
        note = refresh_mcp_listing(server)
        level = messages.WARNING if note.startswith("could not") else messages.INFO
        self.message_user(request, f"MCP server {server.name}: {note}", level)

    @admin.action(description="Fetch the tool lists again")
    def fetch_tools(self, request: HttpRequest, queryset: Any) -> None:
        for server in queryset:
            self._fetch(request, server)


class DataSourceForm(forms.ModelForm):  # type: ignore[type-arg]
    """The URL is a secret: typed, never shown back (not even in the form's HTML); left empty on
    a change, the stored one stays."""

    url = forms.CharField(
        required=False,
        max_length=500,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="postgresql://role:password@host:5432/database or"
        " mysql://user:password@host:3306/database (also mariadb://), for a read-only user. "
        "Never shown again; leave empty to keep the stored one.",
    )

    class Meta:
        model = DataSource
        fields = "__all__"

    def clean_url(self) -> str:
        url = str(self.cleaned_data.get("url") or "")
        if not url:
            if self.instance.pk and self.instance.url:
                return str(self.instance.url)
            raise forms.ValidationError("A source needs its URL.")
        problem = source_url_problem(url)
        if problem:
            raise forms.ValidationError(problem)
        return url

    def clean_timeout_s(self) -> float:
        value = float(self.cleaned_data.get("timeout_s") or 0)
        if not 0.1 <= value <= 300:
            raise forms.ValidationError("between 0.1 and 300 seconds")
        return value


@admin.register(DataSource)
class DataSourceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Saving a source tests its connection and says what it found; the URL shows masked."""

    form = DataSourceForm
    list_display = ("name", "kind", "masked", "enabled", "everyone", "timeout_s")
    list_filter = ("enabled", "kind")
    filter_horizontal = ("users", "groups")
    readonly_fields = ("masked", "kind")  # the URL's scheme says it
    actions = ("check_connection",)
    fieldsets = (
        (None, {"fields": ("name", "description", "enabled")}),
        ("Connection", {"fields": ("kind", "masked", "url", "timeout_s")}),
        ("Who may query it", {"fields": ("everyone", "users", "groups")}),
    )

    @admin.display(description="URL")
    def masked(self, source: DataSource) -> str:
        return masked_source_url(source.url) if source.url else "none yet"

    def save_model(
        self, request: HttpRequest, obj: DataSource, form: Any, change: bool
    ) -> None:
        obj.kind = source_kind(obj.url) or obj.kind
        super().save_model(request, obj, form, change)
        self._check(request, obj)

    def _check(self, request: HttpRequest, source: DataSource) -> None:
        try:
            said = test_source(source)
        except DbSourceError as exc:
            self.message_user(request, f"Source {source.name}: {exc}", messages.WARNING)
            return
        level = messages.WARNING if "WARNING" in said else messages.INFO
        self.message_user(request, f"Source {source.name}: {said}", level)

    @admin.action(description="Test the connection")
    def check_connection(self, request: HttpRequest, queryset: Any) -> None:
        for source in queryset:
            self._check(request, source)


class ToolPolicyForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = ToolPolicy
        fields = ("tool", "decision", "condition", "reason", "preset", "group")

    def clean_condition(self) -> str:
        condition = str(self.cleaned_data.get("condition") or "")
        try:
            parse_condition(condition)
        except ConditionError as exc:
            raise forms.ValidationError(str(exc)) from None
        return condition.strip()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("preset") and data.get("group"):
            raise forms.ValidationError(
                "a default is for a preset or for a group, not both"
            )
        return data


@admin.register(ToolPolicy)
class ToolPolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Admins set defaults per agent preset or group (neither: everyone's); a person's own
    rules are theirs to set and revoke, so here they are read-only."""

    form = ToolPolicyForm
    list_display = (
        "id",
        "tool",
        "decision",
        "condition",
        "preset",
        "group",
        "owner",
        "notebook",
        "set_by",
        "created_at",
        "revoked_at",
    )
    list_filter = ("decision", "preset", "group")
    search_fields = ("tool", "condition", "set_by")
    actions = ("revoke",)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # a rule is never edited in place (the audit names it as it stood): revoke, add anew
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: ToolPolicy, form: Any, change: bool
    ) -> None:
        # through the service: the active turns the rule applies to are re-gated at once
        save_default_policy(obj, request.user.get_username())

    @admin.action(description="Revoke the selected rules")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        pks = list(queryset.values_list("pk", flat=True))
        revoked = revoke_policies(pks, request.user.get_username())
        self.message_user(request, f"Revoked {revoked} rule(s).", messages.INFO)


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """USD per million input and output tokens per model name, for the costs shown."""

    list_display = ("model", "input_usd_per_million", "output_usd_per_million")
    search_fields = ("model",)
