"""Files into DuckDB (issue 27): import memory and query time.

    .venv/bin/python -m bench.bench_duckdb_import --import-mb 25,100 --rows 1000000

import: a CSV of each size (sales-like rows: id, day, shop, product, units, price, note) is
generated on disk, then imported by `runs.service.data_import.import_file` (the code the REST
upload calls) in a child process of its own; its peak resident memory (ru_maxrss) and wall time
are reported, and the size of the Python process before the import (Django, duckdb loaded). DuckDB
reads the file from disk: the peak should stay flat as the file grows, not follow it.

query: a table of `--rows` rows is imported the same way, then three queries (a COUNT, a
GROUP BY over the whole table, a filtered top 10) run `--repeats` times each through
`runs.presets.tools.data.query` (what `data_query` runs: a read-only, locked-down connection
opened per call, one-statement check, interrupt timer, caps, table names) and through DuckDB
alone (`duckdb.connect(path, read_only=True).execute(sql).fetchall()`, also a connection per
call); medians, and ours minus DuckDB's.

The 1 GB / 10 M-row run (`--import-mb 250,1000 --rows 10000000`) is for a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHOPS = [
    "Baixa",
    "Ribeira",
    "Croix-Rousse",
    "Plagwitz",
    "Shibuya",
    "Mission",
    "Fitzroy",
]
PRODUCTS = [f"product-{n:03d}" for n in range(200)]
QUERIES = {
    "count": "SELECT COUNT(*) FROM sales",
    "group_by": (
        "SELECT shop, SUM(units * price) AS revenue, COUNT(*) AS n FROM sales "
        "GROUP BY shop ORDER BY revenue DESC"
    ),
    "top10": (
        "SELECT product, SUM(units) AS units FROM sales WHERE day >= DATE '2024-07-01' "
        "GROUP BY product ORDER BY units DESC LIMIT 10"
    ),
}

_CHILD = """
import json, os, resource, sys, time
import django
django.setup()
from pathlib import Path
from runs.service import data_import
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
table = data_import.import_file(1, Path(sys.argv[1]), "sales.csv", sys.argv[2])
print(json.dumps({"s": time.perf_counter() - started, "rows": table["rows"],
                  "before_kb": before, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def write_csv(path: Path, target_bytes: int = 0, rows: int = 0) -> int:
    """A sales-like CSV of about `target_bytes` (or exactly `rows` rows); returns its rows."""
    rng = random.Random(27)
    written = count = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("id,day,shop,product,units,price,note\n")
        while (target_bytes and written < target_bytes) or (rows and count < rows):
            lines = []
            for _ in range(10_000):
                count += 1
                lines.append(
                    f"{count},2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},"
                    f"{rng.choice(SHOPS)},{rng.choice(PRODUCTS)},{rng.randint(1, 20)},"
                    f"{rng.randint(100, 9999) / 100},note {rng.randint(0, 10**6)}\n"
                )
                if rows and count >= rows:
                    break
            chunk = "".join(lines)
            out.write(chunk)
            written += len(chunk)
    return count


def child_env(data_dir: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="agentui.settings",
        AGENTUI_DATA_DIR=str(data_dir),
        AGENTUI_DATA_MAX_FILE_BYTES=str(64 * 1024**3),
        PYTHONPATH=str(ROOT),
    )
    return env


def import_in_child(csv_path: Path, data_dir: Path, table: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(csv_path), table],
        env=child_env(data_dir),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def bench_import(sizes_mb: list[int], workdir: Path) -> list[dict[str, Any]]:
    results = []
    for mb in sizes_mb:
        data_dir = workdir / f"import-{mb}"
        csv_path = workdir / f"sales-{mb}mb.csv"
        rows = write_csv(csv_path, target_bytes=mb * 1024**2)
        size = csv_path.stat().st_size
        found = import_in_child(csv_path, data_dir, "sales")
        csv_path.unlink()
        results.append(
            {
                "file_mb": round(size / 1024**2, 1),
                "rows": rows,
                "imported_rows": found["rows"],
                "import_s": round(found["s"], 2),
                "rss_before_import_mb": round(found["before_kb"] / 1024, 1),
                "peak_rss_mb": round(found["peak_kb"] / 1024, 1),
            }
        )
        print(json.dumps(results[-1]), flush=True)
    return results


def bench_query(rows: int, repeats: int, workdir: Path) -> dict[str, Any]:
    import django

    data_dir = workdir / "query"
    csv_path = workdir / "sales-query.csv"
    write_csv(csv_path, rows=rows)
    imported = import_in_child(csv_path, data_dir, "sales")
    csv_path.unlink()
    os.environ.update(child_env(data_dir))
    django.setup()
    import duckdb

    from runs.presets.tools import data

    path = str(data.database_path(1))
    results: dict[str, Any] = {"rows": imported["rows"], "queries": {}}
    for name, sql in QUERIES.items():
        ours, alone = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            result = data.query(1, sql)
            ours.append(time.perf_counter() - started)
            started = time.perf_counter()
            with duckdb.connect(path, read_only=True) as connection:
                plain = connection.execute(sql).fetchall()
            alone.append(time.perf_counter() - started)
            assert len(plain) == result["row_count"], (name, len(plain), result)
        ours_ms, alone_ms = (statistics.median(t) * 1000 for t in (ours, alone))
        results["queries"][name] = {
            "ours_ms": round(ours_ms, 2),
            "duckdb_ms": round(alone_ms, 2),
            "overhead_ms": round(ours_ms - alone_ms, 2),
        }
        print(json.dumps({name: results["queries"][name]}), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--import-mb", default="25,100", help="CSV sizes to import, MB")
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="rows for the query part"
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--skip-import", action="store_true")
    parser.add_argument("--skip-query", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "load_before": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory(prefix="bench-duckdb-") as tmp:
        workdir = Path(tmp)
        if not args.skip_import:
            sizes = [int(x) for x in args.import_mb.split(",") if x]
            report["import"] = bench_import(sizes, workdir)
        if not args.skip_query:
            report["query"] = bench_query(args.rows, args.repeats, workdir)
    report["load_after"] = os.getloadavg()[0]
    report["self_peak_rss_mb"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
