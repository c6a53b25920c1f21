"""The seeds' own usage examples, run as written against our package.

Only the import lines differ from LlamaIndex's (``llama_index.*`` -> ``runs.engine``). The model
is the scripted server: ``OPENAI_BASE_URL`` points the SDK at it, so ``OpenAI(model=...)`` lines
stay as the seeds write them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from engine_helpers import seed_rules

from runs.engine.testing import Match, Reply, Rule, Script, ScriptedServer, Timing


@pytest.fixture
def model_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    with ScriptedServer(Script(rules=[])) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server


def seed_tools() -> list[object]:
    # --- as in the seeds' notebooks ---
    from runs.engine import FunctionTool

    def multiply(a: int, b: int) -> int:
        """Multiply two integers and returns the result integer"""
        return a * b

    def add(a: int, b: int) -> int:
        """Add two integers and returns the result integer"""
        return a + b

    multiply_tool = FunctionTool.from_defaults(fn=multiply)
    add_tool = FunctionTool.from_defaults(fn=add)
    return [multiply_tool, add_tool]


def test_lower_level_api_usage_pattern(model_server: ScriptedServer) -> None:
    """004-lower-level-agent-api.md, "Usage Pattern" (the step loop spelled out)."""
    model_server.load(Script(rules=seed_rules()))
    tools = seed_tools()
    # imports: llama_index.core.agent / llama_index.agent.openai / llama_index.llms.openai
    from runs.engine import AgentRunner, OpenAI
    from runs.engine import FunctionCallingAgentWorker as OpenAIAgentWorker

    llm = OpenAI(model="gpt-4o")
    # --- the seed, unchanged ---
    # construct OpenAIAgent from tools
    openai_step_engine = OpenAIAgentWorker.from_tools(tools, llm=llm, verbose=True)
    agent = AgentRunner(openai_step_engine)

    # create task
    task = agent.create_task("What is (121 * 3) + 42?")

    # execute step
    step_output = agent.run_step(task)
    while not step_output.is_last:
        step_output = agent.run_step(task)

    # if step_output is done, finalize response
    if step_output.is_last:
        response = agent.finalize_response(task.task_id)

    # list tasks
    tasks = agent.list_tasks()

    # get completed steps
    completed_steps = agent.get_completed_steps(task.task_id)
    # --- end of the seed ---
    assert "405" in str(response)
    assert [t.task_id for t in tasks] == [task.task_id]
    assert len(completed_steps) == 3
    assert [request.body["model"] for request in model_server.requests] == [
        "gpt-4o"
    ] * 3


def test_function_calling_agent_chat_setup(
    model_server: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The function-calling setup: worker from tools, AgentRunner over it, ``chat``."""
    model_server.load(Script(rules=seed_rules()))
    tools = seed_tools()
    from runs.engine import AgentRunner, FunctionCallingAgentWorker, OpenAI

    # --- the seed, unchanged ---
    llm = OpenAI(model="gpt-3.5-turbo")
    agent_worker = FunctionCallingAgentWorker.from_tools(
        tools,
        llm=llm,
        verbose=True,
        allow_parallel_tool_calls=False,
    )
    agent = AgentRunner(agent_worker)
    response = agent.chat("What is (121 * 3) + 42?")
    print(str(response))
    # --- end of the seed ---
    out = capsys.readouterr().out
    assert "(121 * 3) + 42 = 405" in out
    assert "Calling function: multiply with args" in out  # verbose really prints
    assert all(
        request.body.get("parallel_tool_calls") is False
        for request in model_server.requests
    )


def test_llm_compiler_setup(
    model_server: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """001-llm-compiler.md: the worker with a callback manager, under an AgentRunner, ``chat``."""
    plan = "1. multiply(121, 3)\n2. add($1, 42)\n3. join()<END_OF_PLAN>"
    model_server.load(
        Script(
            rules=[
                Rule(
                    match=Match(system_contains="utmost parallelizability"),
                    reply=Reply(text=plan),
                    timing=Timing(chunking="line"),
                ),
                Rule(
                    match=Match(last_user_contains="Solve a question answering task"),
                    reply=Reply(text="Thought: done\nAction: Finish(405)"),
                ),
            ]
        )
    )
    tools = seed_tools()
    from runs.engine import AgentRunner, CallbackManager, LLMCompilerAgentWorker, OpenAI

    class Handler:
        def __init__(self) -> None:
            self.starts: list[str] = []

        def on_event_start(
            self,
            event_type: str,
            payload: object = None,
            event_id: str = "",
            parent_id: str = "",
            **kwargs: object,
        ) -> str:
            self.starts.append(event_type)
            return event_id

        def on_event_end(
            self,
            event_type: str,
            payload: object = None,
            event_id: str = "",
            **kwargs: object,
        ) -> None:
            return None

    handler = Handler()
    # --- the seed, unchanged ---
    llm = OpenAI(model="gpt-4")
    callback_manager = CallbackManager([handler])
    agent_worker = LLMCompilerAgentWorker.from_tools(
        tools, llm=llm, verbose=True, callback_manager=callback_manager
    )
    agent = AgentRunner(agent_worker, callback_manager=callback_manager)
    response = agent.chat("What is (121 * 3) + 42?")
    print(str(response))
    # --- end of the seed ---
    assert str(response) == "405"
    assert capsys.readouterr().out.strip().endswith("405")
    assert (
        handler.starts.count("function_call") == 2
        and "llm" in handler.starts
        and "agent_step" in handler.starts
    )
