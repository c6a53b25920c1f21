"""A word diff of two texts, as parts the page shows as plain text (never as markup)."""

from __future__ import annotations

import difflib
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

# Past this many words on a side the diff is the whole of each (difflib's cost grows quickly).
MAX_DIFF_WORDS = 20_000
_WORDS = re.compile(r"^\s+|\S+\s*")  # a word with the space after it


class DiffPart(BaseModel):
    """A run of text both have (`same`), only the new one has (`added`) or only the old (`removed`)."""

    model_config = ConfigDict(extra="forbid")

    op: Literal["same", "added", "removed"]
    text: str


def _words(text: str) -> list[str]:
    return _WORDS.findall(text)


def word_diff(before: str, after: str) -> list[DiffPart]:
    """`before` → `after` word by word, whitespace kept, runs of one kind joined."""
    old, new = _words(before), _words(after)
    if max(len(old), len(new)) > MAX_DIFF_WORDS:
        parts = [DiffPart(op="removed", text=before), DiffPart(op="added", text=after)]
        return [p for p in parts if p.text]
    parts: list[DiffPart] = []

    def add(op: Literal["same", "added", "removed"], words: list[str]) -> None:
        text = "".join(words)
        if not text:
            return
        if parts and parts[-1].op == op:
            parts[-1] = DiffPart(op=op, text=parts[-1].text + text)
        else:
            parts.append(DiffPart(op=op, text=text))

    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            add("same", old[i1:i2])
        else:
            add("removed", old[i1:i2])
            add("added", new[j1:j2])
    return parts
