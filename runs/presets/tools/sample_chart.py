"""A sample chart image, drawn from the sample dataset without any imaging library.

The Vision ReAct demo attaches it: a bar chart of 2024 sales revenue for the five cities that
sold the most, tallest first. It is a plain PNG written pixel by pixel (zlib for compression).
"""

from __future__ import annotations

import struct
import zlib
from functools import lru_cache

from runs.presets.tools.sql import sql_query

TOP_CITIES_2024_SQL = (
    "SELECT c.name AS city, ROUND(SUM(s.revenue), 2) AS revenue FROM sales s "
    "JOIN cities c ON c.id = s.city_id WHERE s.sold_on LIKE '2024%' "
    "GROUP BY c.name ORDER BY revenue DESC LIMIT 5"
)
WIDTH, HEIGHT, MARGIN = 480, 300, 30
BACKGROUND = (255, 255, 255)
AXIS = (60, 60, 60)
GRID = (225, 228, 235)
BAR_COLOURS = (
    (37, 99, 235),
    (14, 165, 233),
    (16, 185, 129),
    (245, 158, 11),
    (239, 68, 68),
)
Pixel = tuple[int, int, int]


def _png(pixels: list[list[Pixel]]) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    height, width = len(pixels), len(pixels[0])
    raw = b"".join(b"\x00" + bytes(v for px in row for v in px) for row in pixels)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def bar_chart_png(
    values: list[float], width: int = WIDTH, height: int = HEIGHT
) -> bytes:
    """Bars for ``values`` (left to right) on a white background with axes and grid lines."""
    pixels = [[BACKGROUND] * width for _ in range(height)]
    base, top = height - MARGIN, MARGIN
    for fraction in (0.25, 0.5, 0.75, 1.0):
        y = base - int((base - top) * fraction)
        for x in range(MARGIN, width - MARGIN):
            pixels[y][x] = GRID
    peak = max(values, default=0) or 1
    slot = (width - 2 * MARGIN) // max(len(values), 1)
    for index, value in enumerate(values):
        left = MARGIN + index * slot + slot // 5
        right = MARGIN + (index + 1) * slot - slot // 5
        bar_top = base - int((base - top) * value / peak)
        colour = BAR_COLOURS[index % len(BAR_COLOURS)]
        for y in range(bar_top, base):
            for x in range(left, right):
                pixels[y][x] = colour
    for x in range(MARGIN, width - MARGIN):
        pixels[base][x] = AXIS
    for y in range(top, base + 1):
        pixels[y][MARGIN] = AXIS
    return _png(pixels)


def top_cities_2024() -> list[tuple[str, float]]:
    rows = sql_query(TOP_CITIES_2024_SQL)["rows"]
    return [(str(city), float(revenue)) for city, revenue in rows]


@lru_cache(maxsize=1)
def sample_chart_png() -> bytes:
    """The demo's chart: 2024 revenue of the top five cities, as a PNG."""
    return bar_chart_png([revenue for _, revenue in top_cities_2024()])
