"""The summarizer's chat models: ChatOpenAI for an OpenAI key or an OpenAI-compatible server, the offline
summarizer (offline.py) otherwise."""

from __future__ import annotations

import logging
import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from memory_agent.settings import MemorySettings

logger = logging.getLogger("memory_agent")


def openai_chat_model(model: str | None = None, **options: Any) -> BaseChatModel:
    """ChatOpenAI(model, default OPENAI_MODEL or gpt-4.1-mini) for OPENAI_API_KEY or OPENAI_BASE_URL: with only a
    base URL (a local OpenAI-compatible server) a placeholder key is passed, as such servers need none."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=model or os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"),
        api_key=SecretStr(os.environ.get("OPENAI_API_KEY") or "not-needed"),
        **options,
    )


def default_summary_model(settings: MemorySettings) -> BaseChatModel:
    """ChatOpenAI(settings.memory.model) when an OpenAI key or base URL is set, else the offline summarizer."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        # Retries are ours, recorded on the memory row.
        return openai_chat_model(settings.memory.model, timeout=settings.summary.timeout_s, max_retries=0)
    from memory_agent.summarize.offline import OfflineSummaryModel

    logger.warning("No OPENAI_API_KEY or OPENAI_BASE_URL: using the offline summarizer (extractive, no network)")
    return OfflineSummaryModel()
