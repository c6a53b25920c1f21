"""The offline demo model: the project's scripted server (`server`) and one script per preset.

`register_demo_scripts()` runs from AppConfig.ready and registers the script of every available
preset with the server; each script answers from what the agent actually sent, so edits and
rejections change the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runs.demo.analyst import (
    COA_PROMPT,
    FUNCTION_CALLING_PROMPT,
    LLM_COMPILER_PROMPT,
    coa_rules,
    function_calling_rules,
    llm_compiler_rules,
)
from runs.demo.charts import (
    BRAND_CHART_PROMPT,
    CHART_PROMPT,
    TRAP_CHART_PROMPT,
    brand_chart_rules,
    chart_rules,
    trap_chart_rules,
)
from runs.demo.files import DATA_PROMPT, EXAMPLE_FILE, data_file_rules
from runs.demo.hidden_text import (
    HIDDEN_PROMPT,
    PROSE_PROMPT,
    hidden_prose_rules,
    hidden_text_rules,
)
from runs.demo.logs import LOG_PROMPT, log_rules
from runs.demo.mcp import (
    ALARM_PROMPT,
    MCP_PROMPT,
    SYNC_PROMPT,
    alarm_rules,
    mcp_rules,
    sync_rules,
)
from runs.demo.react import REACT_PROMPT, VISION_PROMPT, react_rules, vision_rules
from runs.demo.research import RESEARCH_PROMPT, research_rules
from runs.demo.server import (
    DEMO_MODEL,
    DemoExample,
    demo_base_url,
    demo_example_prompts,
    register_demo,
)
from runs.demo.slow import SLOW_PROMPT, slow_rules
from runs.demo.sources import DB_PROMPT, db_source_rules
from runs.demo.team import TEAM_PROMPT, team_rules
from runs.engine.testing import Rule

__all__ = [
    "DEMO_MODEL",
    "EXAMPLE_FILE",
    "DemoExample",
    "demo_base_url",
    "demo_example_prompts",
    "register_demo_scripts",
]

# preset -> (its rules, its example prompt); a preset may have more examples under other keys
DEMOS: dict[str, tuple[Callable[[], list[Rule]], str]] = {
    "function_calling": (function_calling_rules, FUNCTION_CALLING_PROMPT),
    "llm_compiler": (llm_compiler_rules, LLM_COMPILER_PROMPT),
    "coa": (coa_rules, COA_PROMPT),
    "react": (react_rules, REACT_PROMPT),
    "vision_react": (vision_rules, VISION_PROMPT),
    "team": (team_rules, TEAM_PROMPT),
    "parallel_research": (research_rules, RESEARCH_PROMPT),
}
EXTRA_EXAMPLES: dict[str, tuple[str, Callable[[], list[Rule]], str]] = {
    "function_calling-chart": ("function_calling", chart_rules, CHART_PROMPT),
    "function_calling-brand-chart": (
        "function_calling",
        brand_chart_rules,
        BRAND_CHART_PROMPT,
    ),
    "function_calling-trap-chart": (
        "function_calling",
        trap_chart_rules,
        TRAP_CHART_PROMPT,
    ),
    "function_calling-log": ("function_calling", log_rules, LOG_PROMPT),
    "function_calling-data": ("function_calling", data_file_rules, DATA_PROMPT),
    "function_calling-mcp": ("function_calling", mcp_rules, MCP_PROMPT),
    "function_calling-mcp-alarm": ("function_calling", alarm_rules, ALARM_PROMPT),
    "function_calling-mcp-sync": ("function_calling", sync_rules, SYNC_PROMPT),
    "function_calling-db": ("function_calling", db_source_rules, DB_PROMPT),
    "function_calling-hidden": ("function_calling", hidden_text_rules, HIDDEN_PROMPT),
    "function_calling-slow": ("function_calling", slow_rules, SLOW_PROMPT),
    "function_calling-hidden-prose": (
        "function_calling",
        hidden_prose_rules,
        PROSE_PROMPT,
    ),
}
# examples that work only for someone who has something (DemoExample.needs)
NEEDS = {"function_calling-db": "db_source"}


def register_demo_scripts(available: Iterable[str] | None = None) -> None:
    """Register the demo script of every available preset with the offline demo model."""
    if available is None:
        from runs.presets import presets

        available = presets()
    names = set(available)
    for preset, (rules, prompt) in DEMOS.items():
        if preset in names:
            register_demo(rules(), prompt, preset)
    for key, (preset, rules, prompt) in EXTRA_EXAMPLES.items():
        if preset in names:
            register_demo(rules(), prompt, preset, key=key, needs=NEEDS.get(key, ""))
