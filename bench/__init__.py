"""Benchmarks, run as modules from the repo root (``.venv/bin/python -m bench.bench_overhead``); see docs/benchmarks.md."""

import os

# A benchmark's few users start hundreds of runs a minute: no per-person rate limit (in this
# process and the servers it starts), unless the shell sets one to measure it.
os.environ.setdefault("AGENTUI_RUNS_PER_MINUTE", "0")
# Nor a limit of sockets per person: a benchmark watches hundreds of notebooks as one user.
os.environ.setdefault("AGENTUI_SOCKETS_PER_USER", "1000000")
