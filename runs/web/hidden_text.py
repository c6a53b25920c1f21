"""A text with every character a page would not show written as [U+XXXX], as the notebook's
cards show a model's tool names (static/js/hidden.js): bidirectional controls (a right-to-left
override draws what follows backwards), zero-width and other default-ignorable characters, tag
characters, control and format characters, line and paragraph separators. A name a model wrote
reaches a page of ours through a rule a person set from its card (the Policies page); it must
read there as what it is. (An emoji's joiners are shown too: no tool name needs one.) The two lists are
checked against each other over every code point (tests/test_hidden_text.py)."""

from __future__ import annotations

import unicodedata

_SHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
# default-ignorable code points outside those categories (Unicode's DerivedCoreProperties)
_IGNORABLE = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2065, 0x2065),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def is_hidden(char: str) -> bool:
    if char in "\t\n\r":
        return False
    if unicodedata.category(char) in _SHOWN_CATEGORIES:
        return True
    point = ord(char)
    return any(low <= point <= high for low, high in _IGNORABLE)


def reveal(text: object) -> str:
    """`text` with each hidden character as [U+XXXX] (a page escapes it as usual)."""
    return "".join(f"[U+{ord(c):04X}]" if is_hidden(c) else c for c in str(text))
