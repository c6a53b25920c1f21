"""The two prompts of a chain of abstraction: write the abstract chain, then refine it into an answer."""

from __future__ import annotations

import string

REASONING_PROMPT_TEMPLATE = """\
Answer the question below. Reason step by step, but do not compute anything a function can \
compute: where a step needs a function, write a placeholder [FUNC name(arguments) = yN] in \
place of its value and use yN for that value from then on.

- Arguments are JSON values (numbers, "strings", lists) or results of earlier placeholders (y1, y2, ...).
- Name results y1, y2, y3, ... in the order you introduce them.
- Placeholders whose inputs do not depend on each other are computed at the same time.
- Use only the functions listed below. If the question needs none, just answer it.

Example (with functions add and divide):
Question: A hotel costs 120 dollars and the train 45. Four friends share the cost; how much does each pay?
Answer: The trip costs [FUNC add(120, 45) = y1] dollars, so each of the four pays [FUNC divide(y1, 4) = y2] dollars.

Functions:
{functions}

Question: {question}
Answer:"""

REFINE_REASONING_PROMPT_TEMPLATE = """\
Below is a question and a chain of reasoning about it. The reasoning was written with \
placeholders for values that functions computed; each placeholder has now been replaced by its \
value, or by the reason it has none (an error, or a person's rejection). Using these values, \
write the final answer to the question in a few sentences. Where a value is missing, say what \
could not be computed and why instead of guessing it.

Question: {question}

Reasoning with values:
{prev_reasoning}

Answer:"""

REASONING_FIELDS = frozenset({"functions", "question"})
REFINE_FIELDS = frozenset({"question", "prev_reasoning"})


def check_template(template: str, fields: frozenset[str], name: str) -> str:
    """Refuse a template that names a field it will not be given, or cannot be formatted."""
    try:
        used = {
            field
            for _, field, _, _ in string.Formatter().parse(template)
            if field is not None
        }
    except ValueError as exc:
        raise ValueError(
            f"{name} cannot be formatted: {exc} (write literal braces as {{{{ and }}}})"
        ) from None
    unknown = sorted(used - fields)
    if unknown:
        allowed = ", ".join("{" + f + "}" for f in sorted(fields))
        raise ValueError(
            f"{name} uses {', '.join('{' + f + '}' for f in unknown)}; it may only use {allowed}"
        )
    return template
