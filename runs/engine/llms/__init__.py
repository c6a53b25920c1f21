"""LLM clients."""

from .base import LLM, ChatResponse, LLMMetadata
from .openai import TRANSPORTS, OpenAI, Transport

__all__ = ["LLM", "TRANSPORTS", "ChatResponse", "LLMMetadata", "OpenAI", "Transport"]
