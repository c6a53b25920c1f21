"""OpenTelemetry export of runs as OpenInference spans (Arize Phoenix, Langfuse, any OTLP collector).

- `config`: whether and where to export, from the standard ``OTEL_*`` variables (off by default);
- `spans`: the spans derived from a notebook's typed events (AGENT > CHAIN > LLM / TOOL);
- `export`: the bounded, non-blocking queue to the OTLP/HTTP exporter, with lost spans counted;
- `recorder`: the process's state and the `observe` hook the live publisher calls.

Kept light on purpose: settings.py imports `config`, which needs nothing else.
"""
