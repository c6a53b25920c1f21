"""The options of LlamaIndex's ``Workflow`` that ``AgentWorkflow(**workflow_kwargs)`` passes on."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from typing import Any

from ..errors import WorkflowConfigError


@dataclass(frozen=True)
class WorkflowOptions:
    """``verbose``: each run's runner prints its steps. ``num_concurrent_runs``: how many runs of
    the workflow go on at once (None: any number). ``disable_validation``: accepted; there is no
    graph of steps here to validate, and the agents' configuration is always checked."""

    verbose: bool = False
    num_concurrent_runs: int | None = None
    disable_validation: bool = False

    @classmethod
    def of(cls, workflow_kwargs: dict[str, Any]) -> WorkflowOptions:
        """The options from ``AgentWorkflow``'s extra keyword arguments; refuses what it cannot honour."""
        if "service_manager" in workflow_kwargs:
            raise WorkflowConfigError(
                "service_manager is not supported: an AgentWorkflow here calls no other workflows "
                "as services. Give their agents to this AgentWorkflow (they hand off to each "
                "other), or call the other workflow from a tool"
            )
        unknown = sorted(set(workflow_kwargs) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(
                f"AgentWorkflow() got unexpected keyword arguments: {', '.join(unknown)}"
            )
        options = cls(**workflow_kwargs)
        limit = options.num_concurrent_runs
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise WorkflowConfigError(
                "num_concurrent_runs must be a positive whole number of runs (or None)"
            )
        return options


class RunSlots:
    """Lets at most ``limit`` runs go on at once (None: no limit), counted per event loop."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._slots: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Semaphore
        ] = weakref.WeakKeyDictionary()

    @asynccontextmanager
    async def taken(self) -> AsyncIterator[None]:
        """Wait for a free slot and hold it while the block runs."""
        if self.limit is None:
            yield
            return
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:
            slots = self._slots[loop] = asyncio.Semaphore(self.limit)
        async with slots:
            yield
