"""The Data page: drop CSV, Parquet or Excel files to make them tables of your own DuckDB
database, see each table's columns, types and rows. Uploads and reads go through the REST API
with the page's session (static/js/data.js), so the page and scripts get the same answers."""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from runs import service
from runs.service import surfaces


@require_GET
def data_page(request: HttpRequest) -> HttpResponse:
    context = {
        "start_url": reverse("api-v1:start_data_upload"),
        "tables_url": reverse("api-v1:data_tables"),
        "sources_url": reverse("api-v1:data_sources"),
        "max_bytes": service.max_data_file_bytes(),
        "example_url": reverse("runs:data_example"),
        "example_name": surfaces.DEMO_DATA_FILE.name,
    }
    return render(request, "runs/data.html", context)


@require_GET
def data_example(request: HttpRequest) -> FileResponse:
    """The demo's example file, to download and drop on the Data page."""
    path = surfaces.DEMO_DATA_FILE
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=path.name,
        content_type="text/csv",
    )
