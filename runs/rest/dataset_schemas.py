"""What the datasets endpoints (runs/rest/datasets.py) take and return: the OpenAPI schema's
datasets, versions, examples, diffs and import refusals. An example's own shape (`ExampleIn`)
is the service's (runs.service.dataset_import), so REST, files and the export check the same.
"""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Field, Path, Schema

from runs import service
from runs.rest.schemas import ErrorOut, Input

ExampleKey = Annotated[str, Path(min_length=1, max_length=100)]
NotebookId = Annotated[int, Field(ge=1, le=2**31 - 1)]
CHANGE_REFUSED: dict[int | tuple[int, ...], Any] = {
    404: ErrorOut,
    409: ErrorOut,
    422: ErrorOut,
}
# a name, description or note with something besides spaces
SOME_TEXT = r"\S"


class DatasetOut(Schema):
    """A dataset as lists show it: its newest version and how many examples that holds."""

    id: int
    name: str
    description: str
    owner: str
    created_at: str = Field(description="ISO 8601, UTC")
    latest_version: int | None = Field(description="null: no version yet")
    example_count: int = Field(description="in the newest version")
    versions: int


class VersionOut(Schema):
    """One immutable version: who made it, when, why, and what changed from the one before."""

    number: int
    created_by: str | None
    created_at: str
    note: str
    example_count: int
    added: int
    removed: int
    changed: int


class DatasetDetail(DatasetOut):
    """A dataset with every version, newest first."""

    version_list: list[VersionOut]


class CallOut(Schema):
    """A tool call the example expects (or refuses), with its arguments."""

    tool: str
    arguments: dict[str, Any]
    step_id: str | None = None
    tool_id: str | None = None
    reason: str | None = Field(
        None, description="a refused call's: why a person refused it"
    )


class TrajectoryOut(Schema):
    """The tool calls the agent should make, in order, and those it must not make."""

    calls: list[CallOut]
    must_not_call: list[CallOut]


class ExampleOut(Schema):
    """An example as stored: the input (the first message and what a rerun needs), the answer
    expected (null: none given), the trajectory expected, and where it came from."""

    id: str = Field(description="the same in every version of the dataset")
    position: int
    input: dict[str, Any]
    expected_output: str | None
    expected_trajectory: TrajectoryOut
    metadata: dict[str, Any]
    source_notebook: int | None


class DatasetIn(Input):
    """A new dataset: its name (one of yours not taken), a description, and what version 1
    holds: examples made from notebooks of yours (or your reviewees'), and examples given."""

    name: str = Field(
        min_length=1, max_length=service.MAX_NAME_CHARS, pattern=SOME_TEXT
    )
    description: str = Field("", max_length=service.MAX_DESCRIPTION_CHARS)
    notebooks: list[NotebookId] = Field([], max_length=service.MAX_NOTEBOOKS_AT_ONCE)
    examples: list[service.ExampleIn] = Field([], max_length=1_000)


class ExamplesIn(Input):
    """What the next version adds: examples made from notebooks, and examples given (one whose
    id is already there replaces it), and why."""

    notebooks: list[NotebookId] = Field([], max_length=service.MAX_NOTEBOOKS_AT_ONCE)
    examples: list[service.ExampleIn] = Field([], max_length=1_000)
    note: str = Field("", max_length=service.MAX_NOTE_CHARS)


class ExampleEditIn(Input):
    """An example's new content (its id stays), and why."""

    example: service.ExampleIn
    note: str = Field("", max_length=service.MAX_NOTE_CHARS)


class DiffOut(Schema):
    """What changed between two versions: example ids added, removed and changed (by content),
    and how many stayed the same."""

    from_version: int
    to_version: int
    added: list[str]
    removed: list[str]
    changed: list[str]
    same: int


class ImportProblemOut(Schema):
    """One bad row of a refused file: its line and what is wrong with it."""

    line: int = Field(description="from 1; a CSV's header is line 1")
    problem: str


class ImportRefusedOut(ErrorOut):
    """A file refused: nothing was imported; each bad row by its line."""

    problems: list[ImportProblemOut] = []


class VersionQuery(Schema):
    """Which version: its number, or the newest."""

    version: int | None = Field(
        None, ge=1, le=2**31 - 1, description="a version's number; left out: the newest"
    )


class DiffQuery(Schema):
    """The two versions compared."""

    base: int = Field(ge=1, le=2**31 - 1, description="the version compared from")
    to: int | None = Field(
        None,
        ge=1,
        le=2**31 - 1,
        description="the version compared to; left out: the newest",
    )
