"""The analysts' built-in tools: safe arithmetic, read-only SQL over a sample dataset, charts,
and the sample web server's access log (an output as large as asked for).

Presets name tools by dotted path (`runs.presets.tools.arithmetic.add`); `ANALYST_TOOLS` is the default
set. Every function here is a plain typed function with a docstring: the engine's FunctionTool
builds the JSON schema from the signature and the description from the docstring.
"""

ARITHMETIC_TOOLS = (
    "runs.presets.tools.arithmetic.add",
    "runs.presets.tools.arithmetic.subtract",
    "runs.presets.tools.arithmetic.multiply",
    "runs.presets.tools.arithmetic.divide",
    "runs.presets.tools.arithmetic.evaluate",
)
SQL_TOOLS = (
    "runs.presets.tools.sql.list_tables",
    "runs.presets.tools.sql.describe_table",
    "runs.presets.tools.sql.sql_query",
    "runs.presets.tools.sql.sql_value",
)
# the person's own uploaded tables (DuckDB), bound to the notebook's owner when its runner is built
DATA_TOOLS = (
    "runs.presets.tools.data.data_tables",
    "runs.presets.tools.data.describe_data_table",
    "runs.presets.tools.data.data_query",
)
CHART_TOOLS = ("runs.presets.tools.chart.CHART_TOOL",)
LOG_TOOLS = ("runs.presets.tools.logs.server_log",)
# a slow plain function: what Stop can and cannot stop (runs.presets.tools.slow)
SLOW_TOOLS = ("runs.presets.tools.slow.archive_report",)
ANALYST_TOOLS = (
    ARITHMETIC_TOOLS + SQL_TOOLS + DATA_TOOLS + CHART_TOOLS + LOG_TOOLS + SLOW_TOOLS
)
