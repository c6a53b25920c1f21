"""Prompt templates given as objects rather than text, such as LlamaIndex's ``PromptTemplate``."""

from __future__ import annotations

from typing import Protocol


class PromptTemplateLike(Protocol):
    """Anything with ``format(**kwargs) -> str``, e.g. LlamaIndex's PromptTemplate."""

    def format(self, **kwargs: str) -> str: ...
