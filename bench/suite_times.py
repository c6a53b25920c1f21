"""Where the test suite's time goes: per pass and per family of modules, setup against call.

Reads the output of `make test` run with `--durations=0` (pytest prints every phase of every
test that took 5 ms or more) and prints one Markdown table per log; docs/benchmarks.md ("The test
suite") keeps them with the command:

    make test PYTEST_ARGS=--durations=0 2>&1 | tee suite.log
    .venv/bin/python -m bench.suite_times suite.log

A pass is a `== Pass N` section of the log. Families: browser (tests/test_browser_*), Phoenix
(the two modules exporting to it), schemathesis and the generated client, live servers (tests
conftest marks `live`: they start daphne, manage.py or Redis; asked of pytest itself with
`--collect-only -m live`), and in-process (the rest); a test marked `browser` outside
tests/test_browser_* counts as browser. Under xdist the figures are summed over the
workers: worker seconds, not wall seconds.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^(\d+\.\d+)s (setup|call|teardown)\s+(\S+)")
PASS = re.compile(r"^== (Pass \d+)")
SUMMARY = re.compile(r"^=+ (.*\d+ passed.*) in ([\d.]+)s")
PHOENIX = {"test_telemetry_phoenix.py", "test_browser_telemetry.py"}
GENERATED = {"test_rest_schemathesis.py", "test_rest_generated_client.py"}
FAMILIES = (
    "browser",
    "Phoenix",
    "schemathesis + generated client",
    "live servers",
    "in-process",
)


def collected(marks: str) -> set[str]:
    """Node ids of the tests `-m marks` selects."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-m",
            marks,
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


def family(node: str, marked: dict[str, set[str]]) -> str:
    module = node.split("::", 1)[0].rsplit("/", 1)[-1]
    if module in PHOENIX:
        return "Phoenix"
    if module.startswith("test_browser_") or node in marked["browser"]:
        return "browser"
    if module in GENERATED:
        return "schemathesis + generated client"
    return "live servers" if node in marked["live"] else "in-process"


def tables(log: str, marked: dict[str, set[str]]) -> str:
    seconds: dict[str, dict[str, dict[str, float]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(float))
    )
    tests: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    summaries: dict[str, str] = {}
    current = "Pass 1"
    for raw in log.splitlines():
        if match := PASS.match(raw):
            current = match.group(1)
        elif match := SUMMARY.match(raw):
            summaries[current] = (
                f"{match.group(1)} in {float(match.group(2)):.0f} s wall"
            )
        elif match := LINE.match(raw):
            took, phase, node = float(match.group(1)), match.group(2), match.group(3)
            node = node.split("@", 1)[0]  # xdist's loadgroup suffix
            kind = family(node, marked)
            seconds[current][kind][phase] += took
            tests[current][kind].add(node)
    out = []
    for name in seconds:
        out.append(f"{name}: {summaries.get(name, '(no summary line)')}\n")
        out.append("| family | tests | setup s | call s | teardown s | total s |")
        out.append("|---|---:|---:|---:|---:|---:|")
        total = defaultdict(float)
        for kind in FAMILIES:
            if kind not in seconds[name]:
                continue
            row = seconds[name][kind]
            for phase in ("setup", "call", "teardown"):
                total[phase] += row[phase]
            out.append(
                f"| {kind} | {len(tests[name][kind])} | {row['setup']:.0f} | {row['call']:.0f}"
                f" | {row['teardown']:.0f} | {sum(row.values()):.0f} |"
            )
        out.append(
            f"| all | {sum(len(t) for t in tests[name].values())} | {total['setup']:.0f}"
            f" | {total['call']:.0f} | {total['teardown']:.0f} | {sum(total.values()):.0f} |\n"
        )
    return "\n".join(out)


def main() -> None:
    marked = {"browser": collected("browser"), "live": collected("live")}
    for path in sys.argv[1:]:
        print(f"### {path}\n")
        print(tables(Path(path).read_text(errors="replace"), marked))


if __name__ == "__main__":
    main()
