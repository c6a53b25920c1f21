"""Benchmarks, run as modules from the repo root (``.venv/bin/python -m bench.bench_overhead``); see docs/benchmarks.md."""
