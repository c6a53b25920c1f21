"""`{% module_preloads "js/trace.js" %}`: a `<link rel="modulepreload">` for every module a page's
entry module imports, directly or not, so the browser fetches them side by side instead of one
level of imports after another (the trace page's modules are six levels deep)."""

from __future__ import annotations

import functools
import posixpath
import re

from django import template
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

register = template.Library()

# Static imports and re-exports with a relative address: `import x from "./a.js"`,
# `export { y } from "../b.js"`, `import "./c.js"`. (Dynamic import() is left to load late.)
_IMPORT = re.compile(
    r"""^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*["'](\.[^"']+)["']"""
    r"""|^\s*import\s*["'](\.[^"']+)["']""",
    re.MULTILINE,
)


@functools.cache
def imported_modules(entry: str) -> tuple[str, ...]:
    """Static paths of the modules `entry` (a static path) imports, at any depth, in the order
    they were found; the entry itself is not in it. Modules that cannot be read are skipped."""
    found: list[str] = []
    todo = [entry]
    while todo:
        path = todo.pop(0)
        located = finders.find(path)
        if not located:
            continue
        with open(located, encoding="utf-8") as file:
            source = file.read()
        for match in _IMPORT.finditer(source):
            target = posixpath.normpath(
                posixpath.join(posixpath.dirname(path), match[1] or match[2])
            )
            if target != entry and target not in found:
                found.append(target)
                todo.append(target)
    return tuple(found)


@register.simple_tag
def module_preloads(entry: str) -> SafeString:
    """The `<link rel="modulepreload">` tags for what `entry` imports."""
    return format_html_join(
        "\n",
        '<link rel="modulepreload" href="{}">',
        ((static(path),) for path in imported_modules(entry)),
    )
