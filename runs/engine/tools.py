"""Tools an agent can call: metadata with a JSON schema, and FunctionTool built from a Python function."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import types
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_serializer,
)

from .errors import ToolArgumentsError
from .tool_parts import ToolPart

# Plain ``def`` tools run here, not in asyncio's default executor, whose min(32, cpus + 4) workers
# would serialise a wide fan-out of blocking tools on a small machine.
_TOOL_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="agent-tool")

# Told, when a plain ``def`` tool's await is cancelled, what became of its thread: the future of
# a function that had begun (a thread cannot be stopped: it runs on), or None if it never began.
ThreadWatch = Callable[["Future[Any] | None"], None]
_thread_watch: ContextVar[ThreadWatch | None] = ContextVar(
    "agentui_tool_thread_watch", default=None
)


@contextmanager
def watching_threads(watch: ThreadWatch) -> Iterator[None]:
    """Around a tool call: ``watch`` hears of a worker thread a cancellation left behind."""
    token = _thread_watch.set(watch)
    try:
        yield
    finally:
        _thread_watch.reset(token)


def _left_behind(future: Future[Any]) -> None:
    """The await of ``future`` was cancelled: drop it if it never began, else report it."""
    never_began = future.cancel()
    watch = _thread_watch.get()
    if watch is not None:
        watch(None if never_began else future)


def json_or_text(value: Any) -> Any:
    """``value`` as JSON data, or as its text where JSON cannot hold it.

    For fields typed ``Any`` that events carry over the wire (a tool's raw output, a model
    reply's ``raw``): whatever a caller put there can be stored and sent.
    """
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


class ToolOutput(BaseModel):
    """What a tool call produced; ``is_error`` marks an error observation (the step goes on)."""

    content: str
    tool_name: str
    raw_input: dict[str, Any] = Field(default_factory=dict)
    raw_output: Any = None
    is_error: bool = False
    # images, resources and links beside the text (MCP results); `content` describes each
    parts: list[ToolPart] = Field(default_factory=list)
    server: str | None = None  # the MCP server the tool came from, for tools from one

    @field_serializer("raw_output", when_used="json")
    def _raw_output_as_json(self, value: Any) -> Any:
        return json_or_text(value)

    def __str__(self) -> str:
        return self.content


# How much of one tool output a model call gets by default (runners take their own limit).
DEFAULT_MODEL_OUTPUT_CHARS = 262_144


def for_model(output: ToolOutput, limit: int | None) -> ToolOutput:
    """``output`` as the model is given it: at most ``limit`` characters, saying so when cut.

    The whole output still travels in its ``ToolCallResult`` event; what the agent's memory,
    the step's sources and every later model call hold is bounded: a cut output keeps no
    ``raw_output`` (a plan's ``$N`` then passes on the slice). Its ``parts`` are the person's
    (the text describes them to the model), so they stay in the event only.
    """
    if output.parts:
        output = output.model_copy(update={"parts": []})
    if not limit or len(output.content) <= limit:
        return output
    return output.model_copy(
        update={"content": model_text(output.content, limit), "raw_output": None}
    )


def model_text(content: str, limit: int | None) -> str:
    """A tool output's text as the model is given it: at most ``limit`` characters, and a note
    saying so when cut (``for_model``; the AG-UI endpoint rebuilds it from a stored event)."""
    total = len(content)
    if not limit or total <= limit:
        return content
    note = (
        f"\n\n[tool output cut: these are the first {limit:,} of {total:,} characters; "
        f"the other {total - limit:,} were left out]"
    )
    return content[:limit] + note


# Argument models' JSON schemas, generated once per model class. Pydantic builds a schema anew on
# every call (~0.1 ms a tool), and every notebook's runner, prompt and model call needs its tools'
# schemas. A model class does not change once built: an edited tool is a new class (or another
# ToolMetadata), so it gets its own entry; a weak key lets a class nobody uses go.
_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)
_NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = _SCHEMAS.get(model)
    if schema is None:
        schema = model.model_json_schema()
        schema.pop("title", None)
        _SCHEMAS[model] = schema
    return schema


class ToolMetadata(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    description: str
    fn_schema: type[BaseModel] | None = None
    return_direct: bool = False
    # the arguments' JSON schema as given, for a tool described elsewhere (an MCP server's tool,
    # runs.engine.schema_tool); used when there is no fn_schema
    parameters_json: dict[str, Any] | None = None

    @property
    def parameters(self) -> dict[str, Any]:
        """The arguments' JSON schema, shared by every user of the model class: read, don't modify."""
        if self.fn_schema is None:
            return self.parameters_json or _NO_PARAMETERS
        return _json_schema(self.fn_schema)

    def parameters_schema(self) -> dict[str, Any]:
        """The arguments' JSON schema, a copy of its own (``parameters`` to only read it)."""
        return copy.deepcopy(self.parameters)

    def to_openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters_schema(),
            },
        }

    @property
    def openai_tool(self) -> dict[str, Any]:
        """``to_openai_tool()`` for a model call, around the shared ``parameters``: read only.

        Not kept on the instance: ``model_copy(update=...)`` copies an instance's cached values,
        and an edited description or schema must reach the model.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def signature(self) -> str:
        """A Python-style signature, e.g. ``search(query: str, limit: int = 5)``, for prompts."""
        props = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", []))
        parts = []
        for pname, pschema in props.items():
            ptype = pschema.get("type", "any")
            part = f"{pname}: {ptype}"
            if pname not in required:
                part += f" = {json.dumps(pschema.get('default'))}"
            parts.append(part)
        return f"{self.name}({', '.join(parts)})"


class ToolContext:
    """Base of the run context a tool may take as its first parameter (``ctx: Context``).

    Such a parameter is not part of the tool's schema: the model never sees it, and the workflow
    passes the run's context when it calls the tool.
    """


def context_type_of(fn: Callable[..., Any]) -> type[ToolContext] | None:
    """The ``ToolContext`` class ``fn``'s first parameter is annotated with, if any."""
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        return None
    annotation = get_type_hints(fn).get(params[0].name)
    if isinstance(annotation, type) and issubclass(annotation, ToolContext):
        return annotation
    return None


def _takes_context(fn: Callable[..., Any]) -> bool:
    return context_type_of(fn) is not None


def _error_output(tool_name: str, kwargs: dict[str, Any], message: str) -> ToolOutput:
    return ToolOutput(
        content=message, tool_name=tool_name, raw_input=kwargs, is_error=True
    )


def failure_output(
    tool_name: str, kwargs: dict[str, Any], exc: BaseException
) -> ToolOutput:
    """A tool's exception as the error observation it becomes."""
    return _error_output(tool_name, kwargs, f"Error: {type(exc).__name__}: {exc}")


def returned_output(tool_name: str, kwargs: dict[str, Any], raw: Any) -> ToolOutput:
    """What a tool function returned, as a ToolOutput."""
    return ToolOutput(
        content=_to_text(raw), tool_name=tool_name, raw_input=kwargs, raw_output=raw
    )


class BaseTool:
    """A callable tool. Subclasses implement ``_acall`` (and may override ``validate``)."""

    metadata: ToolMetadata

    def problems(self, kwargs: dict[str, Any]) -> list[tuple[str, str]]:
        """Where ``kwargs`` do not fit the schema, as (field, message) pairs; empty when they fit."""
        if self.metadata.fn_schema is None:
            return []
        try:
            self.metadata.fn_schema.model_validate(kwargs)
        except ValidationError as exc:
            return [
                (".".join(str(p) for p in err["loc"]) or "arguments", err["msg"])
                for err in exc.errors()
            ]
        return []

    def validate(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Check ``kwargs`` against the schema; return them coerced, or raise ToolArgumentsError."""
        if self.metadata.fn_schema is None:
            return dict(kwargs)
        try:
            model = self.metadata.fn_schema.model_validate(kwargs)
        except ValidationError:
            raise schema_error(self.metadata.name, self.problems(kwargs)) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def _acall(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def acall(self, **kwargs: Any) -> ToolOutput:
        """Validate and run the tool. Never raises for bad arguments or a failing tool."""
        name = self.metadata.name
        try:
            valid = self.validate(kwargs)
        except ToolArgumentsError as exc:
            return _error_output(name, kwargs, f"Error: {exc}")
        try:
            raw = await self._acall(**valid)
        except Exception as exc:  # a tool's failure is an observation for the model
            return failure_output(name, kwargs, exc)
        return returned_output(name, kwargs, raw)

    def call(self, **kwargs: Any) -> ToolOutput:
        from ._sync import run_sync

        return run_sync(self.acall(**kwargs))


def schema_error(tool_name: str, problems: list[tuple[str, str]]) -> ToolArgumentsError:
    listed = "; ".join(f"{field}: {message}" for field, message in problems)
    return ToolArgumentsError(
        f"arguments for {tool_name}() do not fit its schema: {listed}"
    )


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


# Argument models built from functions, per function and tool name: every notebook's runner
# resolves its tools from the same functions, and building a model costs ~0.2 ms a tool. The
# entry remembers what the model was built from, so a function whose code, defaults or
# annotations were replaced gets a new one.
_FUNCTION_SCHEMAS: weakref.WeakKeyDictionary[
    Callable[..., Any], dict[str, tuple[tuple[Any, ...], type[BaseModel]]]
] = weakref.WeakKeyDictionary()


def _built_from(fn: Callable[..., Any]) -> tuple[Any, ...] | None:
    if not isinstance(fn, types.FunctionType):
        return None  # bound methods, partials, callable objects: built each time
    return (fn.__code__, fn.__defaults__, fn.__kwdefaults__, dict(fn.__annotations__))


def schema_from_function(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """A pydantic model of ``fn``'s parameters from its signature and type hints.

    A first parameter annotated with a ``ToolContext`` class is left out (the caller supplies it).
    Built once per function and name; callers share the class (it is only read).
    """
    built_from = _built_from(fn)
    if built_from is None:
        return _build_schema(fn, name)
    models = _FUNCTION_SCHEMAS.setdefault(fn, {})
    known = models.get(name)
    if known is not None and known[0] == built_from:
        return known[1]
    model = _build_schema(fn, name)
    models[name] = (built_from, model)
    return model


def _build_schema(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    params = list(inspect.signature(fn).parameters.items())
    if _takes_context(fn):
        params = params[1:]
    for pname, param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(pname, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, default)
    return create_model(name, **fields)


class FunctionTool(BaseTool):
    """A tool backed by a plain function, an ``async def``, or both."""

    def __init__(
        self,
        metadata: ToolMetadata,
        fn: Callable[..., Any] | None = None,
        async_fn: Callable[..., Awaitable[Any]] | None = None,
    ) -> None:
        if fn is None and async_fn is None:
            raise ValueError("FunctionTool needs fn or async_fn")
        self.metadata = metadata
        self._fn = fn
        self._async_fn = async_fn
        source = async_fn or fn
        assert source is not None
        # the class of the run's context when the function's first parameter takes one
        self.context_type = context_type_of(source)
        self.requires_context = self.context_type is not None

    @classmethod
    def from_defaults(
        cls,
        fn: Callable[..., Any] | None = None,
        async_fn: Callable[..., Awaitable[Any]] | None = None,
        name: str | None = None,
        description: str | None = None,
        return_direct: bool = False,
        fn_schema: type[BaseModel] | None = None,
    ) -> FunctionTool:
        source = fn or async_fn
        if source is None:
            raise ValueError("FunctionTool.from_defaults needs fn or async_fn")
        if fn is None and inspect.iscoroutinefunction(source):
            async_fn, fn = source, None
        elif fn is not None and async_fn is None and inspect.iscoroutinefunction(fn):
            async_fn, fn = fn, None
        tool_name = name or source.__name__
        schema = fn_schema or schema_from_function(source, tool_name)
        doc = inspect.getdoc(source) or ""
        metadata = ToolMetadata(
            name=tool_name,
            description=description or doc or tool_name,
            fn_schema=schema,
            return_direct=return_direct,
        )
        return cls(metadata, fn=fn, async_fn=async_fn)

    def bind_context(self, ctx: ToolContext) -> FunctionTool:
        """This tool with ``ctx`` passed as its first argument on every call."""
        if not self.requires_context:
            return self
        fn, async_fn = self._fn, self._async_fn
        return FunctionTool(
            self.metadata,
            fn=(lambda **kw: fn(ctx, **kw)) if fn is not None else None,
            async_fn=(lambda **kw: async_fn(ctx, **kw))
            if async_fn is not None
            else None,
        )

    async def _acall(self, **kwargs: Any) -> Any:
        if self._async_fn is not None:
            return await self._async_fn(**kwargs)
        assert self._fn is not None
        fn = self._fn
        future = _TOOL_THREADS.submit(lambda: fn(**kwargs))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            _left_behind(future)
            raise


class ToolRetriever(Protocol):
    """Picks tools for a question (LlamaIndex's ``ObjectRetriever[BaseTool]`` fits)."""

    def retrieve(self, query: str) -> Sequence[BaseTool]: ...


def tools_for_query(
    tools: Sequence[BaseTool], retriever: ToolRetriever | None, query: str
) -> list[BaseTool]:
    """``tools`` plus those ``retriever`` picks for ``query`` (a name already taken is skipped)."""
    chosen = list(tools)
    if retriever is not None:
        names = {tool.metadata.name for tool in chosen}
        for tool in retriever.retrieve(query):
            if tool.metadata.name not in names:
                names.add(tool.metadata.name)
                chosen.append(tool)
    return chosen


def tools_by_name(tools: list[BaseTool]) -> dict[str, BaseTool]:
    by_name: dict[str, BaseTool] = {}
    for tool in tools:
        if tool.metadata.name in by_name:
            raise ValueError(f"two tools are named {tool.metadata.name!r}")
        by_name[tool.metadata.name] = tool
    return by_name


async def call_tool_by_name(
    tools: dict[str, BaseTool], name: str, kwargs: dict[str, Any]
) -> ToolOutput:
    """Run the named tool; a name the model invented becomes an error observation."""
    tool = tools.get(name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return _error_output(
            name,
            kwargs,
            f"Error: there is no tool named {name!r}. Available tools: {known}.",
        )
    return await tool.acall(**kwargs)
