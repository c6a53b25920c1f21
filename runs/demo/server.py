"""The offline demo model: the project's scripted OpenAI-compatible server, run in-process.

Agent presets register a few scripted rules and an example prompt with
`register_demo` (best at import time, e.g. from AppConfig.ready). When no LLM
is configured, `demo_base_url()` starts one server for the whole process on
first use and the app talks to it like to any other OpenAI-compatible server.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from runs.demo.judge import judge_rules
from runs.engine.testing import Reply, Rule, Script, ScriptedServer

logger = logging.getLogger(__name__)

DEMO_MODEL = "agentui-demo"  # the model name the demo server answers to

NO_MODEL_REPLY = (
    "No real language model is configured, so agentui's offline demo model is answering. "
    "It only knows the scripted example prompts shown on the start page. "
    "To use a real model, set OPENAI_API_KEY (and optionally AGENTUI_MODEL) for OpenAI, "
    "or OPENAI_BASE_URL and AGENTUI_MODEL for a local OpenAI-compatible server "
    "(vLLM, Ollama, llama.cpp), then restart agentui."
)


@dataclass(frozen=True)
class DemoExample:
    """A prompt the demo model has a script for, and the agent preset it belongs to."""

    preset: str
    prompt: str
    # what a person needs for the example to work ("db_source": a granted database source);
    # the start page offers it only to those who have it
    needs: str = ""


@dataclass(frozen=True)
class _Demo:
    example: DemoExample
    rules: tuple[Rule, ...]


_lock = threading.RLock()  # re-entrant: demo_base_url builds the script under it
# by key (a preset's name for its first example); insertion order is the order shown
_demos: dict[str, _Demo] = {}
_server: ScriptedServer | None = None


def register_demo(
    rules: list[Rule],
    example_prompt: str,
    preset: str,
    key: str | None = None,
    needs: str = "",
) -> None:
    """Add scripted rules for an example prompt of `preset`; registering a key again replaces it.

    `key` (default: the preset's name) tells a preset's examples apart.
    """
    with _lock:
        _demos[key or preset] = _Demo(
            DemoExample(preset, example_prompt, needs), tuple(rules)
        )
        if (
            _server is not None
        ):  # registered late: the running server must learn the new rules
            _server.load(demo_script())


def demo_example_prompts() -> list[DemoExample]:
    """The registered example prompts, in registration order."""
    with _lock:
        return [demo.example for demo in _demos.values()]


def demo_script() -> Script:
    """The script the demo server runs: the judge of experiments, every registered rule, then
    an honest fallback."""
    with _lock:
        rules = [
            *judge_rules(),
            *(rule for demo in _demos.values() for rule in demo.rules),
        ]
    return Script(
        rules=rules,
        on_no_match=Reply(text=NO_MODEL_REPLY),
        model=DEMO_MODEL,
        models=[DEMO_MODEL],
    )


def demo_base_url() -> str:
    """Base URL of this process's demo server, starting it on first call."""
    global _server
    with _lock:
        if _server is None:
            server = ScriptedServer(demo_script())
            server.start()
            _server = server  # its daemon thread ends with the process
            logger.debug("offline demo model serving at %s", server.base_url)
        return str(_server.base_url)


def stop_demo_server() -> None:
    """Stop the demo server if it runs (for tests)."""
    global _server
    with _lock:
        server, _server = _server, None
    if server is not None:
        server.stop()
