"""A 5,000-example dataset: import, list by page, export, a new version, a diff (issue 46 item 5).

    .venv/bin/python -m bench.bench_datasets [--examples 5000]

On a fresh SQLite file, in this process (Django set up here, requests through Django's test
client with a session, as the page sends them): a JSONL file of `--examples` examples shaped as
a notebook makes them (a 200-character message, a 400-character answer, two expected calls, a
refused one, metadata) is imported into a new dataset (`POST /api/v1/datasets/{id}/import`:
read, checked whole, stored); the examples are listed by page over REST (first and last page
of 20) and on the dataset page (first and last page of 25); the version is exported as JSONL
(streamed, read to the end); one example is removed (the next version: 4,999 rows copied); and
the two versions are diffed. Prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _line(n: int) -> str:
    message = (
        f"Question {n}: "
        + ("which region sold most in the quarter, and by how much? " * 4)[:190]
    )
    answer = (
        f"Answer {n}: "
        + ("The north region sold most, 1,234 units over the south. " * 8)[:390]
    )
    return json.dumps(
        {
            "id": f"ex-{n}",
            "input": {"message": message, "agent": "function_calling", "mode": "tools"},
            "expected_output": {
                "answer": answer,
                "trajectory": [
                    {
                        "tool": "sql_query",
                        "arguments": {
                            "query": f"select region, sum(units) from sales where q = {n % 4}"
                        },
                    },
                    {"tool": "multiply", "arguments": {"a": n, "b": 2}},
                ],
                "must_not_call": [
                    {
                        "tool": "chart",
                        "arguments": {"kind": "pie"},
                        "reason": "a table was asked for",
                    }
                ],
            },
            "metadata": {
                "source": "bench",
                "categories": ["sales"],
                "verdict": "pass" if n % 3 else "fail",
            },
        }
    )


def _timed(action: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return round((time.perf_counter() - started) * 1000, 1), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=5000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="agentui-bench-datasets-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentui.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-" + "x" * 40)
    os.environ.pop("REDIS_URL", None)
    os.environ["ALLOWED_HOSTS"] = "testserver"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command
    from django.test import AsyncClient, Client

    from runs import service

    call_command("migrate", "--noinput", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    data = "".join(_line(n) + "\n" for n in range(1, args.examples + 1)).encode()
    dataset = service.create_dataset(user, "Bench")
    client = Client()
    client.force_login(user)
    figures: dict[str, Any] = {"examples": args.examples, "file_bytes": len(data)}

    upload = SimpleUploadedFile("bench.jsonl", data, content_type="application/jsonl")
    ms, response = _timed(
        lambda: client.post(f"/api/v1/datasets/{dataset.pk}/import", {"file": upload})
    )
    assert response.status_code == 201, response.content[:500]
    figures["import_ms"] = ms

    pages = -(-args.examples // 20)
    for name, page in (("first", 1), ("last", pages)):
        ms, response = _timed(
            lambda page=page: client.get(
                f"/api/v1/datasets/{dataset.pk}/examples", {"page": page}
            )
        )
        assert response.status_code == 200 and response.json()["items"]
        figures[f"rest_page_{name}_ms"] = ms
    html_pages = -(-args.examples // 25)
    for name, page in (("first", 1), ("last", html_pages)):
        ms, response = _timed(
            lambda page=page: client.get(
                f"/review/datasets/{dataset.pk}/", {"page": page}
            )
        )
        assert response.status_code == 200
        figures[f"page_{name}_ms"] = ms

    async def export() -> int:
        async_client = AsyncClient()
        await async_client.aforce_login(user)
        response = await async_client.get(f"/api/v1/datasets/{dataset.pk}/export")
        assert response.status_code == 200, response.status_code
        size = 0
        async for chunk in response.streaming_content:
            size += len(chunk)
        return size

    ms, size = _timed(lambda: asyncio.run(export()))
    figures["export_ms"], figures["export_bytes"] = ms, size

    ms, version = _timed(
        lambda: service.remove_examples(dataset, user, ["ex-1"], "bench")
    )
    assert version.example_count == args.examples - 1
    figures["remove_one_new_version_ms"] = ms
    ms, response = _timed(
        lambda: client.get(
            f"/api/v1/datasets/{dataset.pk}/diff", {"base": version.number - 1}
        )
    )
    assert response.json()["removed"] == ["ex-1"]
    figures["diff_ms"] = ms
    figures["load"] = os.getloadavg()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
