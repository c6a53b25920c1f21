"""What a dataset example may hold, and reading examples from an uploaded CSV or JSONL file.

Every example that enters a dataset (from a notebook, a file, REST) is checked against the same
shapes (`ExampleIn`), so what an experiment reruns always has a message and well-formed calls.
A file is read whole before anything is stored: one bad row refuses the file, and the refusal
names each bad row by its line (docs/datasets.md has the column mapping).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runs.conf import conf
from runs.protocol import MAX_TEXT_CHARS, ErrorCode, ProtocolError
from runs.protocol.checks import json_depth, storable_problem

MAX_EXAMPLES = 10_000  # in one version
MAX_EXAMPLE_BYTES = 256 * 1024  # one example's JSON
MAX_KEY_CHARS = 100
MAX_JSON_DEPTH = 32
MAX_PROBLEMS_SHOWN = 20
CSV_COLUMNS = (
    "id",
    "input",
    "expected_output",
    "agent",
    "mode",
    "model",
    "expected_trajectory",
    "must_not_call",
    "metadata",
)
METADATA_PREFIX = "metadata."


def max_import_bytes() -> int:
    """The largest file of examples imported (AGENTUI_DATASET_IMPORT_MAX_BYTES)."""
    return conf().dataset_import_max_bytes


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ExpectedCall(_Strict):
    """A tool call the agent should make, with its arguments."""

    tool: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)
    step_id: str | None = Field(None, max_length=64)
    tool_id: str | None = Field(None, max_length=128)


class RefusedCall(ExpectedCall):
    """A tool call the agent must not make, and why a person refused it."""

    reason: str = Field("", max_length=MAX_TEXT_CHARS)


class ExampleInput(_Strict):
    """What to ask, and what a rerun needs to ask it as the notebook did (all but `message`
    optional: left out, the server's default)."""

    message: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    messages: list[str] | None = Field(None, max_length=100)
    agent: str | None = Field(None, max_length=64)
    mode: Literal["auto", "step", "tools"] | None = None
    model: str | None = Field(None, max_length=100)
    setup: dict[str, Any] | None = None
    tools: list[str] | None = Field(None, max_length=200)
    data_tables: list[str] | None = Field(None, max_length=200)
    attachments: list[dict[str, Any]] | None = Field(None, max_length=20)


class ExpectedOutput(_Strict):
    """The answer expected (None: none given) and the calls expected and refused."""

    answer: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    trajectory: list[ExpectedCall] = Field(default_factory=list, max_length=500)
    must_not_call: list[RefusedCall] = Field(default_factory=list, max_length=500)


class ExampleIn(_Strict):
    """One example as a file's line, REST or the export carries it (`id` kept, else made)."""

    id: str | None = Field(None, min_length=1, max_length=MAX_KEY_CHARS)
    input: ExampleInput | Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
    expected_output: (
        ExpectedOutput | Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None
    ) = None
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class NewExample:
    """An example about to be stored, checked."""

    key: str
    input: dict[str, Any]
    expected_output: str | None
    expected_trajectory: dict[str, list[dict[str, Any]]]
    metadata: dict[str, Any]
    source_notebook: int | None = None

    @property
    def digest(self) -> str:
        """sha256 of the content: the same in two versions when the example did not change."""
        content = [
            self.input,
            self.expected_output,
            self.expected_trajectory,
            self.metadata,
        ]
        canonical = json.dumps(content, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()


class ImportRefused(ProtocolError):
    """A file refused: `problems` names each bad row by its line (1 for a CSV's header)."""

    def __init__(self, problems: list[tuple[int, str]]) -> None:
        shown = [f"line {line}: {what}" for line, what in problems[:MAX_PROBLEMS_SHOWN]]
        more = len(problems) - len(shown)
        tail = f"; and {more:,} more" if more > 0 else ""
        super().__init__(
            ErrorCode.INVALID_INPUT,
            f"Nothing was imported: {'; '.join(shown)}{tail}.",
        )
        self.problems = problems


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
    # a union names its branch (`input.ExampleInput.message`, `input.str`): keep the field
    parts = [p for p in where.split(".") if p not in ("ExampleInput", "ExpectedOutput")]
    if parts and parts[-1] in ("str", "dict[str,any]"):
        parts = parts[:-1]
    return f"{'.'.join(parts) or 'the example'}: {error['msg']}"


def _unstorable(value: Any) -> str | None:
    text = json.dumps(value, ensure_ascii=False)
    if len(text.encode()) > MAX_EXAMPLE_BYTES:
        return f"the example is larger than {MAX_EXAMPLE_BYTES // 1024} KB"
    # nesting needs brackets: most examples have too few to nest that deep, so skip the walk
    brackets = text.count("{") + text.count("[")
    if brackets > MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:
        return f"the example nests deeper than {MAX_JSON_DEPTH} levels"
    problem = storable_problem(text.replace("\\u0000", "\x00"))
    return None if problem is None else f"the example {problem}"


def checked_example(
    given: dict[str, Any], source_notebook: int | None = None
) -> NewExample:
    """`given` (as ExampleIn) as an example to store; ValueError says what is wrong."""
    problem = _unstorable(given)
    if problem is not None:
        raise ValueError(problem)
    try:
        row = ExampleIn.model_validate(given)
    except ValidationError as exc:
        raise ValueError(_first_problem(exc)) from None
    asked = (
        ExampleInput.model_validate({"message": row.input})
        if isinstance(row.input, str)
        else row.input
    )
    expected = row.expected_output
    if expected is None or isinstance(expected, str):
        expected = ExpectedOutput.model_validate({"answer": expected})
    return NewExample(
        key=row.id or uuid.uuid4().hex,
        input=asked.model_dump(exclude_none=True),
        expected_output=expected.answer,
        expected_trajectory={
            "calls": [c.model_dump(exclude_none=True) for c in expected.trajectory],
            "must_not_call": [
                c.model_dump(exclude_none=True) for c in expected.must_not_call
            ],
        },
        metadata=row.metadata,
        source_notebook=source_notebook,
    )


# --- files ---------------------------------------------------------------------------------


def _jsonl_rows(text: str) -> list[tuple[int, dict[str, Any] | str]]:
    rows: list[tuple[int, dict[str, Any] | str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            rows.append((number, f"not JSON ({exc.msg})"))
            continue
        rows.append((number, value if isinstance(value, dict) else "not a JSON object"))
    return rows


def _json_cell(column: str, text: str, kind: type) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"{column}: not JSON") from None
    if not isinstance(value, kind):
        raise ValueError(
            f"{column}: expected a JSON {'list' if kind is list else 'object'}"
        )
    return value


def _csv_example(cells: dict[str, str]) -> dict[str, Any]:
    """A CSV row as ExampleIn (docs/datasets.md): ValueError names the column."""
    asked: dict[str, Any] = {"message": cells.get("input", "")}
    for column in ("agent", "mode", "model"):
        if cells.get(column):
            asked[column] = cells[column]
    expected: dict[str, Any] = {"answer": cells.get("expected_output") or None}
    for column, key in (
        ("expected_trajectory", "trajectory"),
        ("must_not_call", "must_not_call"),
    ):
        if cells.get(column, "").strip():
            expected[key] = _json_cell(column, cells[column], list)
    metadata: dict[str, Any] = {}
    if cells.get("metadata", "").strip():
        metadata = _json_cell("metadata", cells["metadata"], dict)
    for column, value in cells.items():
        if column.startswith(METADATA_PREFIX) and value != "":
            metadata[column[len(METADATA_PREFIX) :]] = value
    example: dict[str, Any] = {
        "input": asked,
        "expected_output": expected,
        "metadata": metadata,
    }
    if cells.get("id"):
        example["id"] = cells["id"]
    return example


def _csv_rows(text: str) -> list[tuple[int, dict[str, Any] | str]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return []
    except csv.Error as exc:
        return [(1, f"not CSV ({exc})")]
    header = [name.strip() for name in header]
    unknown = [
        n for n in header if n not in CSV_COLUMNS and not n.startswith(METADATA_PREFIX)
    ]
    if unknown or "input" not in header or len(set(header)) != len(header):
        why = (
            f"unknown column {unknown[0]!r} (columns: {', '.join(CSV_COLUMNS)}, or "
            f"{METADATA_PREFIX}<name>)"
            if unknown
            else "no input column"
            if "input" not in header
            else "a column is named twice"
        )
        return [(1, why)]
    rows: list[tuple[int, dict[str, Any] | str]] = []
    line = (
        reader.line_num + 1
    )  # where the next record starts (a quoted cell may span lines)
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            rows.append((line, f"not CSV ({exc})"))
            break
        if any(cell.strip() for cell in record):
            if len(record) != len(header):
                rows.append(
                    (line, f"{len(record)} cells, the header has {len(header)}")
                )
            else:
                try:
                    rows.append((line, _csv_example(dict(zip(header, record)))))
                except ValueError as exc:
                    rows.append((line, str(exc)))
        line = reader.line_num + 1
    return rows


def read_examples(file_name: str, data: bytes) -> list[NewExample]:
    """Every example of an uploaded `.csv` or `.jsonl` file, checked; ImportRefused names each
    bad row by its line, ProtocolError a file that cannot be read at all. Stores nothing."""
    most = max_import_bytes()
    if len(data) > most:
        raise ProtocolError(
            ErrorCode.TOO_LARGE,
            f"The file has {len(data):,} bytes; at most {most:,} are imported "
            "(AGENTUI_DATASET_IMPORT_MAX_BYTES).",
        )
    name = file_name.lower()
    if name.endswith(".csv"):
        parse = _csv_rows
    elif name.endswith((".jsonl", ".ndjson")):
        parse = _jsonl_rows
    else:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            "Upload a .csv or .jsonl file (one example per row or line).",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"The file is not UTF-8 text (byte {exc.start:,} cannot be read).",
        ) from None
    rows = parse(text)
    if not rows:
        raise ProtocolError(ErrorCode.INVALID_INPUT, "The file has no examples.")
    if len(rows) > MAX_EXAMPLES:
        raise ProtocolError(
            ErrorCode.TOO_LARGE,
            f"The file has {len(rows):,} examples; a dataset holds at most "
            f"{MAX_EXAMPLES:,}.",
        )
    problems: list[tuple[int, str]] = []
    examples: list[NewExample] = []
    lines: dict[str, int] = {}
    for line, row in rows:
        if isinstance(row, str):
            problems.append((line, row))
            continue
        try:
            example = checked_example(row)
        except ValueError as exc:
            problems.append((line, str(exc)))
            continue
        if example.key in lines:
            problems.append(
                (line, f"id {example.key!r} is on line {lines[example.key]} too")
            )
            continue
        lines[example.key] = line
        examples.append(example)
    if problems:
        raise ImportRefused(problems)
    return examples
