"""A notebook's budgets for scripts: `GET`/`PUT /notebooks/{id}/budget`.

The limits in force and what was spent (runs.service.budget_of); a step waiting because a
budget was reached says so in the notebook's `waiting` list and in the inbox, and approving it
(`POST .../approve`) raises the budget on record, as the page's button does.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Field, Schema

from runs import service
from runs.models import Task
from runs.rest.reading import NOT_FOUND, own_notebook
from runs.rest.router import router
from runs.rest.schemas import ErrorOut, Input


class BudgetIn(Input):
    """A notebook's own budget per run; null fields keep the server's default."""

    run_usd: float | None = Field(
        None,
        ge=0,
        le=100_000,
        description="what one run may spend in US dollars; 0: none; null: the server's default",
    )
    run_tokens: int | None = Field(
        None,
        ge=0,
        le=2**31 - 1,
        description="what one run may use in tokens; 0: none; null: the server's default",
    )


class SpentOut(Schema):
    """What the notebook's latest run and you today have spent, in tokens and US dollars."""

    run_tokens: int
    run_usd: str | None = Field(description="null: the model's price is unknown")
    day_tokens: int
    day_usd: str | None


class BudgetOut(Schema):
    """The budgets in force for a notebook (its own or the server's), and what was spent against
    them."""

    run_usd: str | None = Field(description="in force (a decimal string); null: none")
    run_tokens: int | None
    day_usd: str | None = Field(description="per person and UTC day (the server's)")
    day_tokens: int | None
    own_run_usd: str | None = Field(description="the notebook's own; null: the default")
    own_run_tokens: int | None
    price_known: bool = Field(description="false: dollar budgets cannot be judged")
    spent: SpentOut = Field(description="by the latest run, and by you today")


def budget_now(task: Task) -> dict[str, Any]:
    """The notebook's budgets for its latest run."""
    task.refresh_from_db()
    view = service.notebook_view(task.pk)
    turn = view.active or view.latest
    return service.budget_of(task, turn.engine_id if turn else None)


@router.get(
    "/notebooks/{int:pk}/budget", tags=["read"], response={200: BudgetOut, **NOT_FOUND}
)
def get_budget(request: HttpRequest, pk: int) -> dict[str, Any]:
    """The notebook's budgets in force and what its latest run (and you today) spent."""
    return budget_now(own_notebook(request, pk))


def _set(request: HttpRequest, pk: int, body: BudgetIn) -> dict[str, Any]:
    task = own_notebook(request, pk)
    service.set_budget(pk, body.run_usd, body.run_tokens)
    return budget_now(task)


@router.put(
    "/notebooks/{int:pk}/budget",
    tags=["act"],
    response={200: BudgetOut, **NOT_FOUND, 422: ErrorOut},
)
async def set_budget(request: HttpRequest, pk: int, body: BudgetIn) -> dict[str, Any]:
    """Set the notebook's run budget; from its next step on, a run that has spent it waits
    for you (approve it to raise the budget and go on, or stop it)."""
    return await sync_to_async(_set)(request, pk, body)
