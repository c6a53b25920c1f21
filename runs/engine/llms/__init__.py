"""LLM clients."""

from .base import LLM, ChatResponse, LLMMetadata
from .openai import OpenAI

__all__ = ["LLM", "ChatResponse", "LLMMetadata", "OpenAI"]
