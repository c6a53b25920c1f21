"""The offline demo model's script for the Parallel research preset's example prompt.

The split names three sub-questions; each is answered after a second (so the three branches
are seen running side by side); the synthesis answers from what they found.
"""

from __future__ import annotations

from runs.demo.rules import scripted
from runs.engine.testing import Match, Reply, Rule, Timing

RESEARCH_PROMPT = (
    "Should our café add espresso, filter coffee or cold brew to the menu first?"
)
SUBQUESTIONS = {
    "What equipment and skill does espresso need?": (
        "Espresso needs a machine and grinder (a large outlay) and trained baristas; "
        "it is the base of most milk drinks, which sell best."
    ),
    "What equipment and skill does filter coffee need?": (
        "Filter coffee needs only a batch brewer and a grinder; any staff can make it, "
        "and it is quick to serve at busy hours."
    ),
    "What equipment and skill does cold brew need?": (
        "Cold brew needs steeping containers, fridge space and a day's planning; it "
        "sells mostly in warm months."
    ),
}
ANSWER = (
    "Start with filter coffee: it is cheap to set up and fast to serve (finding 2). "
    "Add espresso once baristas are trained, since milk drinks sell best (finding 1); "
    "keep cold brew for the summer (finding 3)."
)


def research_rules() -> list[Rule]:
    split = "\n".join(f"{i}. {q}" for i, q in enumerate(SUBQUESTIONS, 1))
    rules = [
        Rule(
            name="demo-research-split",
            match=Match(
                system_contains="You plan research", last_user_contains=RESEARCH_PROMPT
            ),
            reply=Reply(text=split),
            timing=Timing(token_delay_s=0.02, chunking="line"),
        ),
        Rule(
            name="demo-research-synthesis",
            match=Match(
                system_contains="final answer", last_user_contains=RESEARCH_PROMPT
            ),
            reply=Reply(text=scripted(ANSWER)),
            timing=Timing(token_delay_s=0.01),
        ),
    ]
    for question, finding in SUBQUESTIONS.items():
        rules.append(
            Rule(
                name=f"demo-research-{question.split()[-2]}",
                match=Match(
                    system_contains="You answer one", last_user_contains=question
                ),
                reply=Reply(text=finding),
                timing=Timing(ttft_s=1.0, token_delay_s=0.02),
            )
        )
    return rules
