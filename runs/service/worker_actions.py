"""What the server hands to a turn worker beyond a client's own actions (runs.protocol).

With turn workers (runs.service.workers) every action that starts or changes a run is carried
out by a worker. Besides the socket's and REST's actions these are: a person's whole decision
on a waiting step as the inbox, AG-UI and a passed deadline make it, and taking over a turn
whose process died. They travel as the client's actions do (`model_dump`, then validated again
in the worker: runs.service.dispatch).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Decide(BaseModel):
    """A whole decision on one waiting step (`runs.service.step_actions.decide`): its new inputs in
    order, the calls rejected with their reasons, then its approval."""

    action: Literal["decide"] = "decide"
    step_id: str
    inputs: list[str] | None = None
    rejections: list[tuple[str, str]] | None = None


class TakeOver(BaseModel):
    """Run on the notebook's turn left by a dead process (runs.service.takeover)."""

    action: Literal["take_over"] = "take_over"
