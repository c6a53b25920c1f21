"""Budgets: what a run (the steps answering one message) and a person's day may spend on model
calls before the run waits for the person to say go on.

A budget is never a silent stop. Before the driver starts a step (and before a new turn's first
step) it asks `reached`; when spending has reached a limit, the step waits like any approval,
its `step_waiting` carrying the budget and a sentence ("budget of $0.50 for this run reached:
$0.51 spent"). Approving it (page, socket, REST, AG-UI: all through `decide`) records a
`budget_raised` human action, the limit before and after, and the step runs; Stop stops the turn
as always. So the audit shows why the run paused and who let it spend more.

What was spent is read from the stored `agent_output` events (one per model call, with its
usage), so it is what the trace shows, undone runs of a step included: they were paid for.
Dollars are the tokens at the price of each call's notebook's model (its own, else the
configured one; runs.store.cost); without a price a
dollar budget cannot be judged and only token budgets apply (the page says the price is
unknown). Limits: the notebook's own run budget (`Task.budget_run_*`, None: the settings'
default, 0: none), the settings' `AGENTUI_BUDGET_*`; a raise holds for the rest of its turn.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from runs.conf import conf
from runs.models import DeletedNotebook, Event, Task
from runs.protocol import ErrorCode, HumanAction, HumanActionKind, ProtocolError
from runs.service.llm import llm_settings
from runs.store.cost import call_usage, cost_decimal, model_of, price_of

RUN, DAY = "run", "day"
USD, TOKENS = "usd", "tokens"
CENT = Decimal("0.000001")
MAX_USD = Decimal(100_000)  # fits Task.budget_run_usd (12 digits, 6 decimals)
MAX_TOKENS = 2**31 - 1
SCOPE_WORDS = {RUN: "for this run", DAY: "for today"}


def usd_words(usd: Decimal) -> str:
    """ "$0.50", "$12.30", "$0.0042": cents from a dime up, two significant digits below."""
    if usd == 0 or abs(usd) >= Decimal("0.1"):
        return f"${usd:,.2f}"
    return "$" + format(Decimal(f"{float(usd):.2g}"), "f")


def amount_words(unit: str, amount: Decimal | int) -> str:
    if unit == USD:
        return usd_words(Decimal(amount))
    return "1 token" if int(amount) == 1 else f"{int(amount):,} tokens"


@dataclass(frozen=True)
class Spent:
    """Tokens used, and what they cost at the price of each call's notebook's model (None:
    no price is known for any of them)."""

    tokens: int = 0
    usd: Decimal | None = None

    def amount(self, unit: str) -> Decimal | int | None:
        return self.tokens if unit == TOKENS else self.usd


@dataclass(frozen=True)
class Reached:
    """A budget that spending has reached: the run waits until the person raises it."""

    scope: str  # run | day
    unit: str  # usd | tokens
    limit: Decimal | int
    spent: Decimal | int
    base: (
        Decimal | int
    )  # the limit before any raise: approving adds this much room again

    @property
    def reason(self) -> str:
        return (
            f"budget of {amount_words(self.unit, self.limit)} {SCOPE_WORDS[self.scope]} "
            f"reached: {amount_words(self.unit, self.spent)} spent"
        )

    @property
    def raise_to(self) -> Decimal | int:
        raised = self.spent + self.base
        return raised.quantize(CENT) if isinstance(raised, Decimal) else raised

    def as_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "unit": self.unit,
            "limit": _str(self.limit),
            "spent": _str(self.spent),
            "raise_to": _str(self.raise_to),
            "reason": self.reason,
            "raise_words": amount_words(self.unit, self.raise_to),
        }


def _default_model() -> str:
    return llm_settings(start_demo=False).model


def base_limits(task: Task) -> dict[tuple[str, str], Decimal | int]:
    """The limits in force for the notebook's runs (before any raise); none set: left out."""
    settings = conf()
    run_usd = (
        task.budget_run_usd
        if task.budget_run_usd is not None
        else Decimal(str(settings.budget_run_usd))
    )
    run_tokens = (
        task.budget_run_tokens
        if task.budget_run_tokens is not None
        else settings.budget_run_tokens
    )
    found: dict[tuple[str, str], Decimal | int] = {
        (RUN, USD): run_usd,
        (RUN, TOKENS): run_tokens,
        (DAY, USD): Decimal(str(settings.budget_user_day_usd)),
        (DAY, TOKENS): settings.budget_user_day_tokens,
    }
    return {key: limit for key, limit in found.items() if limit}


def base_budget(task: Task) -> dict[str, Any]:
    """The limits in force before any raise, as the page reads them (None: no budget)."""
    limits = base_limits(task)
    return {
        f"{scope}_{unit}": _str(limits.get((scope, unit)))
        if unit == USD
        else limits.get((scope, unit))
        for scope in (RUN, DAY)
        for unit in (USD, TOKENS)
    }


def usage_of(
    events: Any, used: dict[str, list[int]] | None = None
) -> dict[str, list[int]]:
    """What these events' model calls used, per notebook model: {model: [prompt, completion]}
    (added to `used`, when given)."""
    used = {} if used is None else used
    for model, tokens in call_usage(events, "task__model").items():
        _add_usage(
            used, model or "", tokens["prompt_tokens"], tokens["completion_tokens"]
        )
    return used


def _add_usage(
    used: dict[str, list[int]], model: str, prompt: Any, completion: Any
) -> None:
    tokens = used.setdefault(model, [0, 0])
    tokens[0] += int(prompt or 0)
    tokens[1] += int(completion or 0)


def _spent(
    events: Any, task: Task, also: list[dict[str, list[int]]] | None = None
) -> Spent:
    """What these model calls used (and the usages `also`: of notebooks deleted today), costed
    per notebook model (a composed notebook calls its own); with no calls, nothing, in dollars
    when `task`'s model has a price."""
    used = usage_of(events)
    for usage in also or []:
        for model, (prompt, completion) in usage.items():
            _add_usage(used, model, prompt, completion)
    default = _default_model()
    usd: Decimal | None = None
    for model, (prompt, completion) in (used or {task.model: [0, 0]}).items():
        cost = cost_decimal(price_of(model or default), prompt, completion)
        if cost is not None:
            usd = (usd or Decimal(0)) + cost
    return Spent(sum(p + c for p, c in used.values()), usd)


def run_spent(turn_id: str, task: Task) -> Spent:
    """What the turn's model calls used, every run of every step."""
    return _spent(Event.objects.filter(turn__engine_id=turn_id), task)


def day_start(now: dt.datetime | None = None) -> float:
    moment = now or dt.datetime.now(dt.UTC)
    return dt.datetime.combine(moment.date(), dt.time(), tzinfo=dt.UTC).timestamp()


def day_spent(task: Task) -> Spent:
    """What the notebook's owner's model calls used since midnight (UTC), across notebooks,
    those they deleted today included (deleting a notebook gives no budget back)."""
    start = day_start()
    deleted = DeletedNotebook.objects.filter(
        owner_id=task.owner_id, day_start=start
    ).values_list("day_usage", flat=True)
    return _spent(
        Event.objects.filter(task__owner_id=task.owner_id, at__gte=start),
        task,
        list(deleted),
    )


def day_usage(task_pk: int) -> tuple[float, dict[str, list[int]]]:
    """Today's start and what the notebook's model calls used since (kept when it is deleted)."""
    start = day_start()
    return start, usage_of(Event.objects.filter(task_id=task_pk, at__gte=start))


def _raises(turn_id: str) -> dict[tuple[str, str], Decimal | int]:
    """The limits raised in this turn (the latest raise of each)."""
    found: dict[tuple[str, str], Decimal | int] = {}
    for after in (
        Event.objects.filter(
            turn__engine_id=turn_id,
            type="human_action",
            payload__action=HumanActionKind.BUDGET_RAISED.value,
        )
        .order_by("seq")
        .values_list("payload__after", flat=True)
    ):
        if isinstance(after, dict) and after.get("unit") in (USD, TOKENS):
            limit = after.get("limit")
            key = (str(after.get("scope")), str(after.get("unit")))
            found[key] = Decimal(str(limit)) if key[1] == USD else int(str(limit))
    return found


def reached(task_pk: int, turn_id: str) -> Reached | None:
    """The first budget the turn's spending (or its owner's today) has reached; None: go on."""
    task = Task.objects.get(pk=task_pk)
    limits = base_limits(task)
    if not limits:
        return None
    raised = _raises(turn_id)
    spent = {
        RUN: run_spent(turn_id, task),
        DAY: day_spent(task) if any(scope == DAY for scope, _ in limits) else Spent(),
    }
    for (scope, unit), base in limits.items():
        amount = spent[scope].amount(unit)
        if amount is None:  # no price: a dollar budget cannot be judged
            continue
        limit = raised.get((scope, unit), base)
        if amount >= limit:
            return Reached(scope, unit, limit, amount, base)
    return None


def budget_wait(step_id: str) -> dict[str, Any] | None:
    """The budget the step waits on now, if its current wait is a budget's (not since run)."""
    latest = (
        Event.objects.filter(step_id=step_id, type__in=("step_waiting", "step_started"))
        .order_by("-seq")
        .values_list("type", "payload__budget")
        .first()
    )
    if latest is None or latest[0] != "step_waiting" or not latest[1]:
        return None
    budget: dict[str, Any] = latest[1]
    return budget


def raise_action(
    turn_id: str, step_id: str, wait: dict[str, Any], by: str
) -> HumanAction:
    """The audit's record of a person letting the run spend past the budget it waited on."""
    scope, unit = wait.get("scope"), wait.get("unit")
    return HumanAction(
        task_id=turn_id,
        step_id=step_id,
        action=HumanActionKind.BUDGET_RAISED,
        by=by,
        before={"scope": scope, "unit": unit, "limit": wait.get("limit")},
        after={"scope": scope, "unit": unit, "limit": wait.get("raise_to")},
        reason=str(wait.get("reason") or ""),
    )


def _usd(raw: Any) -> Decimal | None:
    if raw is None or raw == "":
        return None
    try:
        usd = Decimal(str(raw))
    except InvalidOperation:
        usd = Decimal("NaN")
    if not usd.is_finite() or not 0 <= usd <= MAX_USD:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"run_usd: a budget is 0 (none) to {MAX_USD:,} US dollars, not {str(raw)[:40]!r}",
        )
    return usd.quantize(CENT)


def set_budget(task_pk: int, run_usd: Any, run_tokens: Any) -> None:
    """Set the notebook's run budget (None: the settings' default; 0: none); it applies from
    the next step that starts."""
    usd = _usd(run_usd)
    tokens: int | None = None
    if run_tokens is not None and run_tokens != "":
        try:
            tokens = int(str(run_tokens))
        except ValueError:
            tokens = -1
        if not 0 <= tokens <= MAX_TOKENS:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                f"run_tokens: a budget is 0 (none) to {MAX_TOKENS:,} tokens, "
                f"not {str(run_tokens)[:40]!r}",
            )
    Task.objects.filter(pk=task_pk).update(budget_run_usd=usd, budget_run_tokens=tokens)


def budget_of(task: Task, turn_id: str | None = None) -> dict[str, Any]:
    """The notebook's budgets as the page and REST show them: the limits in force (for
    `turn_id`, after its raises), what that run and its owner today have spent, the price."""
    limits = base_limits(task)
    if turn_id:
        limits.update(_raises(turn_id))
    price = price_of(model_of(task, _default_model()))
    run = run_spent(turn_id, task) if turn_id else _spent(Event.objects.none(), task)
    day = day_spent(task)
    return {
        "run_usd": _str(limits.get((RUN, USD))),
        "run_tokens": limits.get((RUN, TOKENS)),
        "day_usd": _str(limits.get((DAY, USD))),
        "day_tokens": limits.get((DAY, TOKENS)),
        "own_run_usd": _str(task.budget_run_usd),
        "own_run_tokens": task.budget_run_tokens,
        "price_known": price is not None,
        "spent": {
            "run_tokens": run.tokens,
            "run_usd": _str(run.usd),
            "day_tokens": day.tokens,
            "day_usd": _str(day.usd),
        },
    }


def _str(value: Decimal | int | None) -> str | None:
    """A limit or amount as JSON carries it: exact, without trailing zeros ("0.5", "1234")."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    return str(value)
