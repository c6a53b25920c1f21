"""What the demo scripts share: reading a request's tool results, staging a conversation."""

from __future__ import annotations

from collections.abc import Callable

from runs.engine.testing import Match, RecordedRequest, Reply, Rule


def calls_and_results(request: RecordedRequest) -> list[tuple[str, str, str]]:
    """(tool name, call id, result text) of the tool messages after the last user message,
    in order."""
    names: dict[str, str] = {}
    found: list[tuple[str, str, str]] = []
    for message in request.messages:
        if message.get("role") == "user":
            names, found = {}, []
        for call in message.get("tool_calls") or []:
            names[str(call.get("id"))] = str((call.get("function") or {}).get("name"))
        if message.get("role") == "tool":
            call_id = str(message.get("tool_call_id"))
            found.append(
                (names.get(call_id, ""), call_id, str(message.get("content") or ""))
            )
    return found


def tool_results(request: RecordedRequest) -> list[str]:
    """Contents of the tool messages after the last user message, in order."""
    return [text for _, _, text in calls_and_results(request)]


Respond = Callable[[RecordedRequest], Reply]


def staged_rules(prompt: str, stages: list[tuple[str, Reply | Respond]]) -> list[Rule]:
    """A demo conversation on `prompt` as rules: stage n (a rule name and its reply, or a
    function of the request) answers once n tool results came back since the prompt."""
    asks = Match(last_user_contains=prompt)
    return [
        Rule(
            name=name,
            match=asks.model_copy(update={"tool_results_since_user": n}),
            **({"reply": answer} if isinstance(answer, Reply) else {"respond": answer}),
        )
        for n, (name, answer) in enumerate(stages)
    ]


def money(value: float) -> str:
    return f"{value:,.2f}"


SCRIPTED_NOTE = "(scripted demo answer)"


def scripted(answer: str, *, block: bool = False) -> str:
    """A demo answer that says it was written in advance, not worked out by a model.

    `block`: the note gets a paragraph of its own (after Markdown tables or code); otherwise it
    ends the answer's line, so it stays inside ReAct's `Answer:` and LLMCompiler's `Finish(...)`.
    """
    return f"{answer}\n\n_{SCRIPTED_NOTE}_" if block else f"{answer} {SCRIPTED_NOTE}"
