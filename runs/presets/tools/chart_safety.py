"""The subset of Vega-Lite a chart may use: nothing in it can load, link or change the page.

A chart spec is written by the model, so it is untrusted. vega-embed reads options from the spec
itself (`usermeta.embedOptions`: the actions menu, its HTML, the loader), Vega loads data and
images by URL, an SVG colour of `url(http://…)` is fetched when it is drawn, and `href` makes
marks into links. So a spec is checked against allow-lists before it is stored, and anything
outside them is refused with where it is and what is allowed (the model sees it and can fix the
spec on its next step):

- top-level properties, and those of nested views (layers, concatenations, facets, repeats);
- mark types (no `image`, no `geoshape`) and encoding channels (no `href`, `url`);
- `data` is inline rows (`values`, a list) with an optional `name`, nothing that loads or parses;
- `background` a colour string (not an expression); `config` only the styling groups (axes, legends, marks, titles, view, scales, fonts, formats);
- a parameter's input stays inside its chart (no `bind.element`, a selector into the page);
- no key `url`, `href`, `usermeta`, `embedOptions` or `loader` at any depth outside the data rows;
- no string anywhere (keys and data too) holding a CSS resource function such as `url(…)`;
- no count or size beyond what a page can draw (`tickCount`, `maxbins`, a density's `steps`,
  `width`, `height` and the like, outside the data rows: COUNT_LIMITS), since a chart drawn in
  the page's thread that asks for 10⁸ ticks freezes the notebook and crashes its tab.

The page (static/js/render/chart.js) strips option-bearing fields again before drawing; this is
the first line, the page and the Content-Security-Policy are the second and third.
"""

from __future__ import annotations

import re
from typing import Any

TOP_LEVEL_KEYS = frozenset(
    {
        "$schema",
        "align",
        "autosize",
        "background",
        "bounds",
        "center",
        "columns",
        "concat",
        "config",
        "data",
        "description",
        "encoding",
        "facet",
        "hconcat",
        "height",
        "layer",
        "mark",
        "name",
        "padding",
        "params",
        "repeat",
        "resolve",
        "spacing",
        "spec",
        "title",
        "transform",
        "vconcat",
        "view",
        "width",
    }
)
# A view inside a layer, a concatenation, a facet or a repeat: no page-wide settings.
NESTED_KEYS = TOP_LEVEL_KEYS - {
    "$schema",
    "autosize",
    "background",
    "config",
    "padding",
}
MARKS = frozenset(
    {
        "arc",
        "area",
        "bar",
        "boxplot",
        "circle",
        "errorband",
        "errorbar",
        "line",
        "point",
        "rect",
        "rule",
        "square",
        "text",
        "tick",
        "trail",
    }
)
# Vega-Lite's marks left out (a name it does not know at all is left to the schema check).
UNSAFE_MARKS = frozenset({"image", "geoshape"})
CHANNELS = frozenset(
    {
        "angle",
        "color",
        "column",
        "description",
        "detail",
        "facet",
        "fill",
        "fillOpacity",
        "key",
        "opacity",
        "order",
        "radius",
        "radius2",
        "row",
        "shape",
        "size",
        "stroke",
        "strokeDash",
        "strokeOpacity",
        "strokeWidth",
        "text",
        "theta",
        "theta2",
        "time",
        "tooltip",
        "x",
        "x2",
        "xError",
        "xError2",
        "xOffset",
        "y",
        "y2",
        "yError",
        "yError2",
        "yOffset",
    }
)
_CONFIG_KEY = re.compile(
    r"(axis[A-Za-z]*|header[A-Za-z]*|legend|title|view|range|scale|style|background|padding"
    r"|font|numberFormat|timeFormat|normalizedNumberFormat|countTitle|fieldTitle|concat|facet"
    r"|aria|mark|" + "|".join(sorted(MARKS)) + r")"
)
DATA_KEYS = frozenset({"values", "name"})
# Keys that load, link or carry embed options, wherever they are (outside the data rows).
FORBIDDEN_KEYS = frozenset({"url", "href", "usermeta", "embedOptions", "loader"})
VIEW_LISTS = ("layer", "hconcat", "vconcat", "concat")
# Numbers that set how many things a chart makes, and their caps (the page holds the same list:
# static/js/render/chart_limits.js).
COUNT_LIMITS = {
    "tickCount": 500,
    "maxbins": 500,
    "steps": 1000,
    "minsteps": 1000,
    "maxsteps": 1000,
    "width": 10000,
    "height": 10000,
    "continuousWidth": 10000,
    "continuousHeight": 10000,
    "discreteWidth": 10000,
    "discreteHeight": 10000,
}

# CSS functions that fetch a resource. CSS escapes (`u\72l(`, `u\rl(`) and comments are undone
# before looking, as the browser would.
_RESOURCE_FUNCTION = re.compile(
    r"(url|src|image|image-set|cross-fade|element)\s*\(|@import", re.IGNORECASE
)
_CSS_HEX_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})\s?")
_CSS_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_CSS_COMMENT = re.compile(r"/\*.*?(\*/|$)", re.DOTALL)


def _unescape_css(text: str) -> str:
    def hex_char(match: re.Match[str]) -> str:
        code = int(match.group(1), 16)
        return chr(code) if 0 < code <= 0x10FFFF else "\ufffd"

    text = _CSS_HEX_ESCAPE.sub(hex_char, text)
    text = _CSS_ESCAPE.sub(r"\1", text)
    return _CSS_COMMENT.sub("", text)


def loads_a_resource(text: str) -> bool:
    """Whether `text`, read as CSS, names a resource to fetch (`url(…)` and its kin)."""
    if "(" not in text and "@" not in text and "\\" not in text:
        return False
    return bool(_RESOURCE_FUNCTION.search(_unescape_css(text)))


def where(path: Any) -> str:
    """A path into a spec as the model would write it: `layer[0].mark.color`."""
    return (
        "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        or "the spec"
    )


def _listed(names: frozenset[str]) -> str:
    return ", ".join(sorted(names))


class _Check:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, path: tuple[str | int, ...], message: str) -> None:
        self.problems.append(f"{where(path)}: {message}")

    def view(self, spec: Any, path: tuple[str | int, ...], top: bool) -> None:
        if not isinstance(spec, dict):
            return  # the schema check says what a view must be
        allowed = TOP_LEVEL_KEYS if top else NESTED_KEYS
        for key in spec:
            if key not in allowed and key not in FORBIDDEN_KEYS:
                self.fail(
                    path + (key,),
                    f"'{key}' is not allowed in a chart here (allowed: {_listed(allowed)})",
                )
        self.mark(spec.get("mark"), path + ("mark",))
        encoding = spec.get("encoding")
        if isinstance(encoding, dict):
            for channel in encoding:
                if channel not in CHANNELS and channel not in FORBIDDEN_KEYS:
                    self.fail(
                        path + ("encoding", channel),
                        f"the channel '{channel}' is not allowed (allowed: {_listed(CHANNELS)})",
                    )
        self.data(spec.get("data"), path + ("data",))
        if top:
            self.config(spec.get("config"), path + ("config",))
            background = spec.get("background")
            if background is not None and not isinstance(background, str):
                self.fail(
                    path + ("background",),
                    "the background must be a colour name or code",
                )
        self.params(spec.get("params"), path + ("params",))
        for key in VIEW_LISTS:
            views = spec.get(key)
            if isinstance(views, list):
                for i, inner in enumerate(views):
                    self.view(inner, path + (key, i), top=False)
        self.view(spec.get("spec"), path + ("spec",), top=False)

    def mark(self, mark: Any, path: tuple[str | int, ...]) -> None:
        kind = mark.get("type") if isinstance(mark, dict) else mark
        if isinstance(kind, str) and kind in UNSAFE_MARKS:
            self.fail(
                path, f"the mark '{kind}' is not allowed (allowed: {_listed(MARKS)})"
            )

    def data(self, data: Any, path: tuple[str | int, ...]) -> None:
        if data is None:
            return
        if not isinstance(data, dict):
            self.fail(path, "data must be {'values': [...rows]}")
            return
        for key in data:
            if key not in DATA_KEYS and key not in FORBIDDEN_KEYS:
                self.fail(
                    path + (key,),
                    f"'{key}' is not allowed in data: give the rows inline as data.values",
                )
        if "values" in data and not isinstance(data["values"], list):
            self.fail(path + ("values",), "data.values must be a list of rows")

    def config(self, config: Any, path: tuple[str | int, ...]) -> None:
        if not isinstance(config, dict):
            return
        for key in config:
            if not _CONFIG_KEY.fullmatch(key):
                self.fail(
                    path + (key,),
                    f"'{key}' is not allowed in config (only styling: axes, legends, marks, "
                    "titles, view, range, scale, fonts and formats)",
                )

    def params(self, params: Any, path: tuple[str | int, ...]) -> None:
        if not isinstance(params, list):
            return
        for i, param in enumerate(params):
            bind = param.get("bind") if isinstance(param, dict) else None
            if isinstance(bind, dict) and "element" in bind:
                self.fail(
                    path + (i, "bind", "element"),
                    "an input binds inside its chart, never to an element elsewhere on the page",
                )

    def anywhere(self, value: Any, path: tuple[str | int, ...], in_rows: bool) -> None:
        """Forbidden keys (outside data rows) and resource-loading strings (everywhere)."""
        if isinstance(value, dict):
            for key, inner in value.items():
                key_text = str(key)
                if not in_rows and key_text in FORBIDDEN_KEYS:
                    self.fail(
                        path + (key_text,),
                        f"'{key_text}' is not allowed: charts load nothing and link nowhere",
                    )
                    continue
                if loads_a_resource(key_text):
                    self.fail(path, f"the name {key_text[:60]!r} loads a resource")
                cap = None if in_rows else COUNT_LIMITS.get(key_text)
                if (
                    cap is not None
                    and isinstance(inner, int | float)
                    and not isinstance(inner, bool)
                    and inner > cap
                ):
                    self.fail(
                        path + (key_text,),
                        f"{inner} is more than a chart may ask for (at most {cap})",
                    )
                rows = in_rows or (
                    key_text == "values" and len(path) > 0 and path[-1] == "data"
                )
                self.anywhere(inner, path + (key_text,), rows)
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                self.anywhere(inner, path + (i,), in_rows)
        elif isinstance(value, str) and loads_a_resource(value):
            self.fail(
                path,
                f"{value[:60]!r} would load a resource (url(…) and the like are not allowed)",
            )


def unsafe_parts(spec: dict[str, Any], limit: int = 3) -> list[str]:
    """What in `spec` falls outside the safe subset (at most `limit`, with where); empty if none."""
    check = _Check()
    check.anywhere(spec, (), in_rows=False)
    check.view(spec, (), top=True)
    seen: list[str] = []
    for problem in check.problems:
        if problem not in seen:
            seen.append(problem)
    return seen[:limit]
