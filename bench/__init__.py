"""Benchmarks (run as scripts: ``python bench/bench_overhead.py``); see docs/benchmarks.md."""
