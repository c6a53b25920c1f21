"""Agent presets: the agents a person can pick for a notebook, each a worker plus its tools.

Built in: `function_calling`, `coa` (Chain of Abstraction) and, when its worker is installed,
`llm_compiler`. Settings can
change a preset's tools or add presets without touching this module::

    AGENTUI_PRESETS = {
        "function_calling": {"tools": ["runs.presets.tools.arithmetic.add", "myapp.tools.search"]},
        "react": {
            "label": "ReAct",
            "worker": "runs.engine.workers.react.ReActAgentWorker",  # a class with from_tools(tools, llm=...)
            "tools": ["runs.presets.tools.ANALYST_TOOLS"],                    # or a factory (tools, llm) -> worker
        },
    }

A tool path names a function (wrapped as a FunctionTool), a BaseTool, or a list/tuple of such
paths or objects (like `runs.presets.tools.ANALYST_TOOLS`).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from runs.conf import conf
from runs.engine import (
    LLM,
    AgentRunner,
    BaseAgentWorker,
    BaseTool,
    FunctionCallingAgentWorker,
    FunctionTool,
    MultimodalReActAgentWorker,
    ParallelAgentRunner,
    ParallelResearchWorker,
    ReActAgentWorker,
    ReActChatFormatter,
)
from runs.engine.workers.react import REACT_MM_CHAT_SYSTEM_HEADER
from runs.presets.team import build_team
from runs.presets.tools import ANALYST_TOOLS
from runs.presets.tools.data import scope_binder
from runs.presets.tools.team import TEAM_TOOLS

logger = logging.getLogger(__name__)

# a preset with the person's own data tools also gets their database sources' tools
DATA_QUERY = "data_query"

WorkerFactory = Callable[[list[BaseTool], LLM], BaseAgentWorker]

ANALYST_SYSTEM_PROMPT = (
    "You are a careful data analyst. A sample SQLite database of coffee-shop sales is available "
    "through your tools: cities(id, name, country, region, population), products(id, name, "
    "category, unit_price) and sales(id, sold_on, city_id, product_id, quantity, revenue), for "
    "2023 and 2024. The person's own uploaded tables (DuckDB) are read with data_tables, "
    "describe_data_table and data_query. Look at the data with the SQL tools and compute with the arithmetic tools "
    "rather than in your head; then answer briefly and say which numbers you used."
)


class WorkerClass(Protocol):
    """A worker class built the LlamaIndex way: ``cls.from_tools(tools, llm=llm)``."""

    def from_tools(self, tools: Sequence[BaseTool], *, llm: LLM) -> BaseAgentWorker: ...


@dataclass(frozen=True)
class Preset:
    """An agent a notebook can use."""

    name: str
    label: str
    description: str
    tools: tuple[str, ...]  # dotted paths, resolved when a runner is built
    build: WorkerFactory
    # ParallelAgentRunner for a worker whose steps fan out (they then run side by side)
    runner: type[AgentRunner] = AgentRunner
    # the composer offers image uploads; they reach the task as image_docs
    accepts_images: bool = False

    def make_tools(
        self,
        owner_id: int | None = None,
        keep: Sequence[str] | None = None,
        tables: Sequence[str] | None = None,
    ) -> list[BaseTool]:
        """The preset's tools, resolved from their dotted paths; only those named in `keep`
        when given (a composed notebook's pick); with `owner_id`, the data tools read that
        user's own tables, only `tables` of them when given (runs.presets.tools.data)."""
        tools = resolve_tools(self.tools)
        if keep is not None:
            tools = [tool for tool in tools if tool.metadata.name in keep]
        if owner_id is None:
            return tools
        bind = scope_binder(owner_id, tables)
        return [bind(tool) for tool in tools]

    def make_worker(
        self,
        llm: LLM,
        owner_id: int | None = None,
        extra_tools: Sequence[BaseTool] = (),
        source_tools: Sequence[BaseTool] = (),
        keep: Sequence[str] | None = None,
        tables: Sequence[str] | None = None,
    ) -> BaseAgentWorker:
        """The preset's worker over its tools (`keep`, `tables`: as for make_tools),
        `extra_tools` (a notebook's MCP tools), and `source_tools` (its owner's database
        sources) if the preset reads data at all."""
        tools = self.make_tools(owner_id, keep, tables)
        taken = {tool.metadata.name for tool in tools}
        if DATA_QUERY in taken:
            extra_tools = [*source_tools, *extra_tools]
        tools += [tool for tool in extra_tools if tool.metadata.name not in taken]
        return self.build(tools, llm)


def _as_tools(value: Any, path: str) -> list[BaseTool]:
    if isinstance(value, BaseTool):
        return [value]
    if isinstance(value, (list, tuple)):
        return [
            tool
            for item in value
            for tool in (
                _resolve(item) if isinstance(item, str) else _as_tools(item, path)
            )
        ]
    if callable(value):
        return [FunctionTool.from_defaults(value)]
    raise ImproperlyConfigured(
        f"AGENTUI_PRESETS: {path} is not a tool, a function or a list of them"
    )


# Where the built-in tools lived before runs/ was split into layers; settings may still name it.
_OLD_TOOLS_PACKAGE = "runs.tools."


def _resolve(path: str) -> list[BaseTool]:
    if path.startswith(_OLD_TOOLS_PACKAGE):
        moved = "runs.presets.tools." + path.removeprefix(_OLD_TOOLS_PACKAGE)
        logger.warning("AGENTUI_PRESETS: %s is now %s", path, moved)
        path = moved
    try:
        value = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"AGENTUI_PRESETS: cannot import tool {path!r} ({exc})"
        ) from None
    return _as_tools(value, path)


def resolve_tools(paths: Sequence[str]) -> list[BaseTool]:
    """Tools for dotted paths; later tools with a name already taken are dropped (first wins)."""
    tools: dict[str, BaseTool] = {}
    for path in paths:
        for tool in _resolve(path):
            tools.setdefault(tool.metadata.name, tool)
    return list(tools.values())


def _function_calling(tools: list[BaseTool], llm: LLM) -> BaseAgentWorker:
    return FunctionCallingAgentWorker.from_tools(
        tools, llm=llm, system_prompt=ANALYST_SYSTEM_PROMPT
    )


def _llm_compiler(tools: list[BaseTool], llm: LLM) -> BaseAgentWorker:
    from runs.engine.workers.llm_compiler import LLMCompilerAgentWorker

    return LLMCompilerAgentWorker.from_tools(tools, llm=llm, max_replans=3)


def _chain_of_abstraction(tools: list[BaseTool], llm: LLM) -> BaseAgentWorker:
    from runs.engine.workers.coa import REASONING_PROMPT_TEMPLATE, CoAAgentWorker

    # the worker has no system prompt: the dataset's description leads its reasoning prompt
    template = f"{ANALYST_SYSTEM_PROMPT}\n\n{REASONING_PROMPT_TEMPLATE}"
    return CoAAgentWorker.from_tools(tools, llm=llm, reasoning_prompt_template=template)


def _parallel_research(tools: list[BaseTool], llm: LLM) -> BaseAgentWorker:
    return ParallelResearchWorker.from_tools(tools, llm=llm)


def _react(tools: list[BaseTool], llm: LLM) -> BaseAgentWorker:
    formatter = ReActChatFormatter.from_defaults(context=ANALYST_SYSTEM_PROMPT)
    return ReActAgentWorker.from_tools(
        tools, llm=llm, react_chat_formatter=formatter, max_iterations=12
    )


class _VisionReActWorker(MultimodalReActAgentWorker):
    """The vision preset's worker: a refusal of images names the setting an analyst can change."""

    refusal_advice = (
        "Set AGENTUI_MODEL to a model that accepts image input (a vision model)."
    )


def _vision_react(tools: list[BaseTool], llm: LLM) -> BaseAgentWorker:
    formatter = ReActChatFormatter.from_defaults(
        system_header=REACT_MM_CHAT_SYSTEM_HEADER, context=ANALYST_SYSTEM_PROMPT
    )
    return _VisionReActWorker.from_tools(
        tools,
        multi_modal_llm=llm,
        react_chat_formatter=formatter,
        max_iterations=12,
    )


def _llm_compiler_available() -> bool:
    try:
        import runs.engine.workers.llm_compiler  # noqa: F401
    except ImportError:
        return False
    return True


def _builtin() -> dict[str, Preset]:
    presets = {
        "function_calling": Preset(
            name="function_calling",
            label="Function calling",
            description="The model calls tools through the API's function calling, a turn at a time.",
            tools=ANALYST_TOOLS,
            build=_function_calling,
        )
    }
    presets["react"] = Preset(
        name="react",
        label="ReAct",
        description="The model reasons in writing (Thought, Action, Observation) and calls one tool at a time.",
        tools=ANALYST_TOOLS,
        build=_react,
    )
    presets["vision_react"] = Preset(
        name="vision_react",
        label="Vision ReAct",
        description="ReAct that also looks at the images you attach (PNG, JPEG, WebP or GIF).",
        tools=ANALYST_TOOLS,
        build=_vision_react,
        accepts_images=True,
    )
    if _llm_compiler_available():
        presets["llm_compiler"] = Preset(
            name="llm_compiler",
            label="LLMCompiler",
            description="Plans tool calls as a graph, runs independent calls in parallel, then joins.",
            tools=ANALYST_TOOLS,
            build=_llm_compiler,
        )
    presets["team"] = Preset(
        name="team",
        label="Team",
        description="A planner, an analyst and a reviewer hand the work to each other and share notes.",
        tools=(*ANALYST_TOOLS, *TEAM_TOOLS),
        build=build_team,
    )
    presets["coa"] = Preset(
        name="coa",
        label="Chain of Abstraction",
        description="Reasons with placeholders for tool results, runs the calls as a graph, then fills in the values.",
        tools=ANALYST_TOOLS,
        build=_chain_of_abstraction,
    )
    presets["parallel_research"] = Preset(
        name="parallel_research",
        label="Parallel research",
        description="Splits a question into sub-questions, answers them side by side, then writes one answer.",
        tools=(),
        build=_parallel_research,
        runner=ParallelAgentRunner,
    )
    return presets


def _from_class(worker_class: WorkerClass) -> WorkerFactory:
    def build(tools: list[BaseTool], llm: LLM) -> BaseAgentWorker:
        return worker_class.from_tools(tools, llm=llm)

    return build


def _factory(path: str) -> WorkerFactory:
    try:
        target = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"AGENTUI_PRESETS: cannot import worker {path!r} ({exc})"
        ) from None
    if inspect.isclass(target):
        return _from_class(cast(WorkerClass, target))
    if callable(target):
        return target  # type: ignore[no-any-return]
    raise ImproperlyConfigured(
        f"AGENTUI_PRESETS: worker {path!r} is neither a class nor a factory"
    )


def _configured(name: str, config: dict[str, Any], base: Preset | None) -> Preset:
    unknown = set(config) - {"label", "description", "tools", "worker"}
    if unknown:
        raise ImproperlyConfigured(
            f"AGENTUI_PRESETS[{name!r}]: unknown keys {sorted(unknown)}"
        )
    tools = tuple(config["tools"]) if "tools" in config else None
    if base is None:
        if "worker" not in config:
            raise ImproperlyConfigured(
                f"AGENTUI_PRESETS[{name!r}]: a new preset needs 'worker' (a dotted path)"
            )
        base = Preset(
            name, name, "", tools or ANALYST_TOOLS, _factory(config["worker"])
        )
    changes: dict[str, Any] = {
        k: config[k] for k in ("label", "description") if k in config
    }
    if tools is not None:
        changes["tools"] = tools
    if "worker" in config:
        changes["build"] = _factory(config["worker"])
    return replace(base, **changes)


def presets() -> dict[str, Preset]:
    """Every available preset by name: the built-ins, changed and extended by AGENTUI_PRESETS."""
    available = _builtin()
    for name, config in (conf().presets or {}).items():
        if config is None:  # `"llm_compiler": None` hides a built-in
            available.pop(name, None)
            continue
        available[name] = _configured(name, dict(config), available.get(name))
    return available


def get_preset(name: str) -> Preset | None:
    """The preset called `name`, or None when there is none."""
    return presets().get(name)


def default_preset_name() -> str:
    return next(iter(presets()), "function_calling")


def all_presets() -> list[Preset]:
    """The available presets in display order (the pickers' list)."""
    return list(presets().values())
