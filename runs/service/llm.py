"""Which language model the app talks to, resolved from settings.

OPENAI_API_KEY alone means OpenAI; OPENAI_BASE_URL (+ AGENTUI_MODEL) means any
OpenAI-compatible server; nothing set means the offline demo model, a scripted
server started inside this process (see runs.demo).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from runs.conf import conf
from runs.demo import DEMO_MODEL, demo_base_url

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
DEMO_LABEL = "Offline demo model — no LLM configured"
# The openai client refuses to start without a key; local servers ignore it.
PLACEHOLDER_API_KEY = "not-needed"


@dataclass(frozen=True)
class LLMSettings:
    """Connection details for the chat-completions API, plus how to name it on a page."""

    base_url: str  # "" for the demo model when resolved with start_demo=False
    api_key: str
    model: str
    is_demo: bool
    label: str

    @property
    def host(self) -> str:
        """host[:port] of base_url, for showing on a page ("" when not known yet)."""
        return _host(self.base_url) if self.base_url else ""


def llm_settings(*, start_demo: bool = True) -> LLMSettings:
    """The configured LLM; in demo mode starts the scripted server unless start_demo is False."""
    api_key: str = settings.OPENAI_API_KEY
    base_url: str = settings.OPENAI_BASE_URL
    model = conf().model
    if not api_key and not base_url:
        demo_url = ""
        if start_demo:
            demo_url = demo_base_url()
        return LLMSettings(demo_url, PLACEHOLDER_API_KEY, DEMO_MODEL, True, DEMO_LABEL)
    base_url = base_url or OPENAI_BASE_URL
    model = model or DEFAULT_OPENAI_MODEL
    return LLMSettings(
        base_url=base_url,
        api_key=api_key or PLACEHOLDER_API_KEY,
        model=model,
        is_demo=False,
        label=f"{model} at {_host(base_url)}",
    )


def _host(url: str) -> str:
    """host[:port] of a URL, leaving out any credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


def offered_models() -> list[str]:
    """The models a composed notebook may pick: the configured one first, then AGENTUI_MODELS
    (the demo model alone when no model is configured)."""
    config = llm_settings(start_demo=False)
    if config.is_demo:
        return [config.model]
    extra = (name.strip() for name in conf().models.split(","))
    return list(dict.fromkeys([config.model, *(name for name in extra if name)]))
