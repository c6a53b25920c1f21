"""The analysts' built-in tools: safe arithmetic, read-only SQL over a sample dataset, charts.

Presets name tools by dotted path (`runs.tools.arithmetic.add`); `ANALYST_TOOLS` is the default
set. Every function here is a plain typed function with a docstring: the engine's FunctionTool
builds the JSON schema from the signature and the description from the docstring.
"""

ARITHMETIC_TOOLS = (
    "runs.tools.arithmetic.add",
    "runs.tools.arithmetic.subtract",
    "runs.tools.arithmetic.multiply",
    "runs.tools.arithmetic.divide",
    "runs.tools.arithmetic.evaluate",
)
SQL_TOOLS = (
    "runs.tools.sql.list_tables",
    "runs.tools.sql.describe_table",
    "runs.tools.sql.sql_query",
    "runs.tools.sql.sql_value",
)
CHART_TOOLS = ("runs.tools.chart.CHART_TOOL",)
ANALYST_TOOLS = ARITHMETIC_TOOLS + SQL_TOOLS + CHART_TOOLS
