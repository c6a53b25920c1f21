"""One worker base: every worker is built by the same ``from_tools`` and lists tools the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from runs.engine import AgentRunner, OpenAI
from runs.engine.tools import BaseTool
from runs.engine.workers.base import BaseAgentWorker
from runs.engine.workers.coa import CoAAgentWorker
from runs.engine.workers.function_calling import FunctionCallingAgentWorker
from runs.engine.workers.llm_compiler import LLMCompilerAgentWorker
from runs.engine.workers.react import ReActAgentWorker
from runs.engine.workers.react.multimodal import MultimodalReActAgentWorker
from runs.engine.workers.research import ParallelResearchWorker
from tests.engine_helpers import arithmetic_tools

WORKERS: list[type[BaseAgentWorker]] = [
    FunctionCallingAgentWorker,
    ReActAgentWorker,
    MultimodalReActAgentWorker,
    LLMCompilerAgentWorker,
    CoAAgentWorker,
    ParallelResearchWorker,
]


def unreachable_llm() -> OpenAI:
    # never asked: these tests only build workers
    return OpenAI(model="scripted", api_base="http://127.0.0.1:9/v1", api_key="sk-test")


@pytest.mark.parametrize("worker_class", WORKERS, ids=lambda c: c.__name__)
def test_from_tools_names_the_keyword_arguments_it_cannot_use(
    worker_class: type[BaseAgentWorker],
) -> None:
    with pytest.raises(TypeError, match="max_iteration, no_such_option"):
        worker_class.from_tools(
            arithmetic_tools(),
            llm=unreachable_llm(),
            max_iteration=3,  # a typo of ReAct's max_iterations
            no_such_option=True,
        )


@pytest.mark.parametrize("worker_class", WORKERS, ids=lambda c: c.__name__)
def test_get_tools_takes_the_seed_input_argument(
    worker_class: type[BaseAgentWorker],
) -> None:
    worker = worker_class.from_tools(arithmetic_tools(), llm=unreachable_llm())
    names = ["multiply", "add"]
    assert [t.metadata.name for t in worker.get_tools()] == names
    assert [t.metadata.name for t in worker.get_tools("what is 2 * 3?")] == names


class Picker:
    def __init__(self, tools: Sequence[BaseTool]) -> None:
        self.tools = list(tools)
        self.queries: list[str] = []

    def retrieve(self, query: str) -> Sequence[BaseTool]:
        self.queries.append(query)
        return self.tools


@pytest.mark.parametrize(
    "worker_class",
    [LLMCompilerAgentWorker, CoAAgentWorker, ReActAgentWorker],
    ids=lambda c: c.__name__,
)
def test_get_tools_for_an_input_asks_the_retriever(
    worker_class: type[BaseAgentWorker],
) -> None:
    picker = Picker(arithmetic_tools())
    worker = worker_class.from_tools(tool_retriever=picker, llm=unreachable_llm())
    assert [t.metadata.name for t in worker.get_tools("2 * 3?")] == ["multiply", "add"]
    assert picker.queries == ["2 * 3?"]


def test_a_worker_without_tools_refuses_them_by_name() -> None:
    with pytest.raises(TypeError, match="tool_retriever"):
        FunctionCallingAgentWorker.from_tools(
            tool_retriever=Picker([]), llm=unreachable_llm()
        )


def test_multimodal_takes_llm_as_its_multi_modal_llm() -> None:
    llm = unreachable_llm()
    worker: Any = MultimodalReActAgentWorker.from_tools([], llm=llm)
    assert worker.multi_modal_llm is llm


def test_from_llm_builds_react_for_a_model_without_function_calling() -> None:
    llm = OpenAI(
        model="scripted",
        api_base="http://127.0.0.1:9/v1",
        api_key="sk-test",
        is_function_calling_model=False,
    )
    agent = AgentRunner.from_llm(tools=arithmetic_tools(), llm=llm, max_iterations=4)
    worker = agent.agent_worker
    assert isinstance(worker, ReActAgentWorker) and worker.max_iterations == 4
    with pytest.raises(TypeError, match="system_prompt"):
        AgentRunner.from_llm(tools=arithmetic_tools(), llm=llm, system_prompt="x")
