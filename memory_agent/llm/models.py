"""The chat models memory_agent calls when the application passes none: ChatOpenAI for an OpenAI key or an
OpenAI-compatible server, the offline model (offline.py) otherwise. One factory for every purpose."""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from memory_agent.llm.offline import OFFLINE_CONSOLIDATOR, OFFLINE_SUMMARIZER, OfflineModel
from memory_agent.settings import MemorySettings

logger = logging.getLogger("memory_agent")

ModelRole = Literal["summary", "consolidation"]


def openai_configured() -> bool:
    """Whether OPENAI_API_KEY or OPENAI_BASE_URL is set: then the default models are ChatOpenAI."""
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def openai_chat_model(model: str | None = None, **options: Any) -> BaseChatModel:
    """ChatOpenAI(model, default OPENAI_MODEL or gpt-4.1-mini) for OPENAI_API_KEY or OPENAI_BASE_URL: with only a
    base URL (a local OpenAI-compatible server) a placeholder key is passed, as such servers need none."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=model or os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"),
        api_key=SecretStr(os.environ.get("OPENAI_API_KEY") or "not-needed"),
        **options,
    )


def default_chat_model(settings: MemorySettings, role: ModelRole = "summary") -> BaseChatModel:
    """The model of `role` when none is passed: ChatOpenAI when an OpenAI key or base URL is set (the summarizer:
    memory_model, no client retries, the runner's are recorded on the memory row; consolidation:
    consolidation_model, default memory_model, one client retry), else the offline model under its role's name."""
    if openai_configured():
        if role == "summary":
            return openai_chat_model(settings.memory.model, timeout=settings.summary.timeout_s, max_retries=0)
        name = settings.consolidation.consolidation_model or settings.memory.model
        return openai_chat_model(name, timeout=settings.summary.timeout_s, max_retries=1)
    logger.warning("No OPENAI_API_KEY or OPENAI_BASE_URL: using the offline %s model (no network)", role)
    return OfflineModel(model_name=OFFLINE_SUMMARIZER if role == "summary" else OFFLINE_CONSOLIDATOR)
