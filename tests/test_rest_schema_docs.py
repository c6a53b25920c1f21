"""Every schema of the REST API says what it is: its docstring is the OpenAPI description."""

from __future__ import annotations

import ast
from pathlib import Path

from runs.rest.api import api

REST = Path(__file__).resolve().parent.parent / "runs" / "rest"


def test_every_schema_in_the_openapi_document_has_a_description() -> None:
    schemas = api.get_openapi_schema()["components"]["schemas"]
    assert len(schemas) > 60
    undescribed = sorted(
        name for name, schema in schemas.items() if not schema.get("description")
    )
    assert undescribed == []


def test_every_schema_class_of_the_rest_api_has_a_docstring() -> None:
    # query-parameter schemas (filters, paging) never become components, so read the source too
    undocumented = [
        f"{module.name}:{node.name}"
        for module in sorted(REST.glob("*.py"))
        for node in ast.parse(module.read_text()).body
        if isinstance(node, ast.ClassDef) and not ast.get_docstring(node)
    ]
    assert undocumented == []
