"""The *Team* preset: a planner, an analyst and a reviewer sharing one conversation and state.

The planner settles what to find out (asking the person when only they can say) and hands off
to the analyst, who queries and computes with the analyst tools and hands off to the reviewer,
who checks the numbers and answers or hands back. Each agent turn is one step of the notebook.
"""

from __future__ import annotations

from runs.engine import LLM, AgentWorkflow, BaseAgentWorker, BaseTool, FunctionAgent

PLANNER_PROMPT = (
    "You are the team's planner. Decide what must be found out to answer the person; ask them "
    "with ask_person when only they can decide something. Save the plan with save_note "
    "(key 'plan'), then hand off to the analyst."
)
ANALYST_PROMPT = (
    "You are the team's analyst. A sample SQLite database of coffee-shop sales is available: "
    "cities(id, name, country, region, population), products(id, name, category, unit_price), "
    "sales(id, sold_on, city_id, product_id, quantity, revenue) for 2023 and 2024. Follow the "
    "plan in the state: query with the SQL tools, compute with the arithmetic tools, save what "
    "you found with save_note (key 'finding'), then hand off to the reviewer."
)
REVIEWER_PROMPT = (
    "You are the team's reviewer. Check the analyst's numbers against the data (query again "
    "if in doubt). If they hold, answer the person briefly with the numbers; if not, hand back "
    "to the analyst saying what is wrong."
)
TEAM_AGENTS = ("planner", "analyst", "reviewer")

_TEAM_TOOL_NAMES = {"save_note", "ask_person"}


def build_team(tools: list[BaseTool], llm: LLM) -> BaseAgentWorker:
    """The team's workflow worker, from the preset's tools (analyst tools + team tools)."""
    shared = [t for t in tools if t.metadata.name == "save_note"]
    asking = [t for t in tools if t.metadata.name == "ask_person"]
    analysis = [t for t in tools if t.metadata.name not in _TEAM_TOOL_NAMES]
    workflow = AgentWorkflow(
        [
            FunctionAgent(
                name="planner",
                description="Plans the work and asks the person what only they can decide",
                system_prompt=PLANNER_PROMPT,
                tools=shared + asking,
                llm=llm,
                can_handoff_to=["analyst"],
            ),
            FunctionAgent(
                name="analyst",
                description="Queries the sales data and computes the numbers",
                system_prompt=ANALYST_PROMPT,
                tools=analysis + shared,
                llm=llm,
                can_handoff_to=["reviewer"],
            ),
            FunctionAgent(
                name="reviewer",
                description="Checks the analyst's numbers and answers the person",
                system_prompt=REVIEWER_PROMPT,
                tools=[t for t in analysis if t.metadata.name.startswith("sql")],
                llm=llm,
                can_handoff_to=["analyst"],
            ),
        ],
        root_agent="planner",
        initial_state={"plan": "", "finding": ""},
    )
    return workflow.worker
