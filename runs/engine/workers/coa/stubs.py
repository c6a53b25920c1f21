"""Tool descriptions as Python function stubs, rendered from each tool's JSON schema.

A model writing ``[FUNC add(120, 45) = y1]`` reads tools best as the signatures it has seen in
code: ``def add(a: int, b: int):`` with the description as the docstring. Optional parameters
(not required, or nullable) read ``Optional[...]``, and defaults are shown as Python literals.
"""

from __future__ import annotations

from typing import Any

from ...tools import BaseTool

_SCALARS = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}


def schema_type(schema: dict[str, Any]) -> str:
    """The Python annotation for a JSON schema fragment (``Any`` when it says nothing usable)."""
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        kinds = [schema_type(option) for option in options if isinstance(option, dict)]
        concrete = [kind for kind in kinds if kind != "None"]
        if not concrete:
            return "None"
        inner = concrete[0] if len(concrete) == 1 else f"Union[{', '.join(concrete)}]"
        return f"Optional[{inner}]" if len(concrete) < len(kinds) else inner
    if "enum" in schema and isinstance(schema["enum"], list):
        return f"Literal[{', '.join(repr(value) for value in schema['enum'])}]"
    kind = schema.get("type")
    if isinstance(kind, list):
        return schema_type({"anyOf": [{"type": k} for k in kind]})
    if kind == "array":
        items = schema.get("items")
        return (
            f"List[{schema_type(items)}]"
            if isinstance(items, dict) and items
            else "List[Any]"
        )
    if kind == "object":
        values = schema.get("additionalProperties")
        return (
            f"Dict[str, {schema_type(values)}]"
            if isinstance(values, dict) and values
            else "Dict[str, Any]"
        )
    if isinstance(kind, str):
        return _SCALARS.get(kind, "Any")
    return "Any"


def _parameter(name: str, schema: dict[str, Any], required: bool) -> str:
    annotation = schema_type(schema)
    if required:
        return f"{name}: {annotation}"
    if not annotation.startswith("Optional[") and annotation not in ("Any", "None"):
        annotation = f"Optional[{annotation}]"
    return f"{name}: {annotation} = {schema.get('default')!r}"


def function_stub(name: str, schema: dict[str, Any], description: str = "") -> str:
    """``def name(params):`` with the description as its docstring and ``...`` as its body."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    # Python wants parameters without a default first; keep the schema's order otherwise
    ordered = [p for p in properties if p in required] + [
        p for p in properties if p not in required
    ]
    params = ", ".join(
        _parameter(p, properties[p] or {}, p in required) for p in ordered
    )
    doc = description.strip().replace('"""', "'''")
    lines = [f"def {name}({params}):"]
    if doc:
        lines.append('    """' + doc.replace("\n", "\n    ") + '"""')
    lines.append("    ...")
    return "\n".join(lines)


def tool_stub(tool: BaseTool) -> str:
    """The stub of one tool, from its metadata."""
    meta = tool.metadata
    return function_stub(meta.name, meta.parameters, meta.description)


def parameter_names(tool: BaseTool) -> list[str]:
    """The parameter names positional arguments fill, in the stub's order."""
    schema = tool.metadata.parameters
    properties = list((schema.get("properties") or {}).keys())
    required = set(schema.get("required") or [])
    return [p for p in properties if p in required] + [
        p for p in properties if p not in required
    ]
