"""The chat models memory_agent calls when the application passes none, named by a setting.

MEMORY_AGENT_MEMORY_MODEL (and MEMORY_AGENT_CONSOLIDATION_MODEL) take LangChain's `init_chat_model` form
`provider:model` (`openai:gpt-4.1-mini`, `anthropic:claude-sonnet-4-5`, `ollama:llama3.1`, any installed
integration); a bare name means OpenAI, and `offline` the deterministic offline model (offline.py), which runs
only when named. Each provider's client reads its own environment variables (keys, base URLs); a model that
cannot be made (no credentials, a missing integration package) is a ConfigurationError naming what to set or
install, raised before the service opens anything.
"""

from __future__ import annotations

import difflib
import logging
import os
import unicodedata
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from memory_agent.errors import ConfigurationError
from memory_agent.llm.calls import model_name
from memory_agent.llm.offline import OFFLINE_CONSOLIDATOR, OFFLINE_SUMMARIZER, OfflineModel
from memory_agent.settings import ConsolidationSettings, MemoryWindowSettings, SummarySettings

ModelRole = Literal["summary", "consolidation"]
OFFLINE = "offline"
MEMORY_MODEL_VARIABLE = "MEMORY_AGENT_MEMORY_MODEL"
CONSOLIDATION_MODEL_VARIABLE = "MEMORY_AGENT_CONSOLIDATION_MODEL"
logger = logging.getLogger("memory_agent")

# What each provider's client reads from the environment. `needs`: one of these must be set for a model of the
# provider to answer (its client would otherwise fail on the first call, in the background, round after round).
PROVIDER_VARIABLES: dict[str, dict[str, tuple[str, ...]]] = {
    "openai": {"needs": ("OPENAI_API_KEY", "OPENAI_BASE_URL"), "reads": ("OPENAI_API_KEY", "OPENAI_BASE_URL")},
    "anthropic": {
        "needs": ("ANTHROPIC_API_KEY",),
        "reads": ("ANTHROPIC_API_KEY", "ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL"),  # the API URL first, as its client
    },
    "ollama": {"needs": (), "reads": ("OLLAMA_HOST",)},
    "google_genai": {"needs": ("GOOGLE_API_KEY",), "reads": ("GOOGLE_API_KEY",)},
    "groq": {"needs": ("GROQ_API_KEY",), "reads": ("GROQ_API_KEY",)},
    "mistralai": {"needs": ("MISTRAL_API_KEY",), "reads": ("MISTRAL_API_KEY",)},
}


def openai_configured() -> bool:
    """Whether OPENAI_API_KEY or OPENAI_BASE_URL is set: then a bare model name can be answered."""
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


def split_model_setting(name: str) -> tuple[str, str]:
    """(provider, model) of a setting's value: `provider:model` for a provider LangChain knows, else OpenAI's model
    `name` whole (a bare name keeps meaning OpenAI, and `llama3.1:8b` is not a provider `llama3.1`)."""
    from langchain.chat_models.base import _BUILTIN_PROVIDERS

    provider, colon, model = name.partition(":")
    normalized = provider.strip().replace("-", "_").lower()
    if colon and normalized in _BUILTIN_PROVIDERS:
        return normalized, model.strip()
    return "openai", name.strip()


def _unsendable(provider: str) -> str | None:
    """The first of the provider's variables whose value its client cannot send (a header refuses surrounding
    whitespace and control characters, a key anything but printable ASCII: a stray newline or carriage return from
    an env file; a base URL must be http(s) with a host), said without the value. Sent anyway, every call failed
    as `Connection error.`, as if the network were away, and was retried as such."""
    for name in PROVIDER_VARIABLES.get(provider, {}).get("reads", ()):
        value = os.environ.get(name)
        if not value:
            continue
        key = name.endswith("_KEY")
        if value != value.strip() or any(ord(c) < 32 or ord(c) == 127 or (key and ord(c) > 126) for c in value):
            outside = ", a control character or a character outside ASCII" if key else " or a control character"
            return f"{name} holds whitespace around it{outside} (a stray newline?); its value is not shown"
        if name == "OLLAMA_HOST" and "://" not in value:  # its client reads `host:port` as http://host:port
            value = f"http://{value}"
        if name.endswith(("_URL", "_HOST")) and not _http_url(value):
            # `localhost:8000/v1` (the scheme left out) read as a URL of scheme `localhost`: every call failed as
            # `Connection error.`, retried as if the server were down. Its value may hold a password: not shown.
            return (
                f"{name} is not an http:// or https:// URL with a host (such as http://host:8000/v1); its value "
                "is not shown"
            )
    return None


def _http_url(value: str) -> bool:
    """Whether `value` is an absolute http(s) URL naming a host, as a client's base URL must be."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def _warn_if_misspelled(variable: str, name: str) -> None:
    """A bare name whose part before a `:` is close to a provider's (`antropic:claude-x`) is sent to OpenAI as
    written, and fails only on the first summary, in the background: said at once. Not refused, as a bare name
    with a colon is often an OpenAI-compatible server's model (`mistral:7b`, `qwen:7b`)."""
    from langchain.chat_models.base import _BUILTIN_PROVIDERS

    prefix, colon, _ = name.strip().partition(":")
    normalized = prefix.strip().replace("-", "_").lower()
    if not colon or normalized in _BUILTIN_PROVIDERS:
        return
    near = difflib.get_close_matches(normalized, sorted(_BUILTIN_PROVIDERS), n=1, cutoff=0.8)
    if near:
        logger.warning(
            "%s=%r is a bare name, sent to the OpenAI API (OPENAI_BASE_URL) as the model %r; if %r was meant as "
            "the provider, write `%s:...`",
            variable,
            name,
            name.strip(),
            prefix,
            near[0],
        )


def _other_providers_model(name: str) -> str | None:
    """The provider LangChain would read a bare name as (`claude-sonnet-4-5`: anthropic), when not OpenAI. Such a
    name is sent to OpenAI as written: its API has no such model (a gateway behind OPENAI_BASE_URL may)."""
    try:
        from langchain.chat_models.base import _attempt_infer_model_provider
    except ImportError:  # a private helper of LangChain's: without it, nothing is said
        return None
    inferred = _attempt_infer_model_provider(name.strip())
    return inferred if inferred not in (None, "openai") and ":" not in name else None


def _client_options(provider: str, timeout_s: float, max_retries: int) -> dict[str, Any]:
    """The timeout and client retries in the words of the provider's chat model (others get none: the summary
    runner bounds each attempt with its own timeout)."""
    if provider in ("openai", "anthropic", "azure_openai", "groq", "mistralai", "deepseek", "xai"):
        return {"timeout": timeout_s, "max_retries": max_retries}
    if provider == "ollama":
        return {"client_kwargs": {"timeout": timeout_s}}
    return {}


def _own_async_client(timeout_s: float) -> dict[str, Any]:
    """An HTTP client of the model's own. langchain-openai shares one per (base URL, timeout) across the process,
    and its pooled connections belong to the event loop that opened them: a service opened again (a new memory
    loop, a test's loop) failed its next summary with "Event loop is closed". With OPENAI_PROXY set the
    integration makes one per model itself (and refuses one given)."""
    if os.environ.get("OPENAI_PROXY"):
        return {}
    import openai

    return {"http_async_client": openai.DefaultAsyncHttpxClient(timeout=timeout_s)}


def unusable(variable: str, name: str, why: str) -> ConfigurationError:
    """The error of a model setting whose model cannot be made, saying what to set."""
    return ConfigurationError(
        f"{variable}={name!r}: {why}. Set {variable} to `provider:model` (openai:gpt-4.1-mini, "
        "anthropic:claude-sonnet-4-5, ollama:llama3.1, ...) with that provider's variables set, or to `offline` "
        "for the deterministic offline summarizer (no model: copies of the messages, not summaries)"
    )


def chat_model_from_setting(
    name: str, *, variable: str, role: ModelRole = "summary", timeout_s: float = 120.0, max_retries: int = 0
) -> BaseChatModel:
    """The chat model a setting names (see the module docstring). `variable` is the setting's environment name,
    for the error."""
    if name.strip().lower() == OFFLINE:
        return OfflineModel(model_name=OFFLINE_SUMMARIZER if role == "summary" else OFFLINE_CONSOLIDATOR)
    # Cc: a newline or escape; Cf: invisible (a zero-width space or byte order mark pasted with the value), sent
    # to the provider as part of the model's name: HTTP 404 on every summary, the name looking right in the log.
    if any(unicodedata.category(char) in ("Cc", "Cf") for char in name.strip()):
        raise unusable(
            variable, name, "holds a control or invisible character (a stray newline, escape or zero-width space?)"
        )
    if name.strip().startswith(":"):  # `:gpt-4o` is a provider left out, not OpenAI's model ":gpt-4o"
        raise unusable(variable, name, "names no provider before the `:`")
    provider, model = split_model_setting(name)
    if not model:
        raise unusable(variable, name, "names no model")
    needs = PROVIDER_VARIABLES.get(provider, {}).get("needs", ())
    if needs and not any(os.environ.get(need) for need in needs):
        why = f"the {provider} provider needs {' or '.join(needs)}, and none is set"
        prefix, colon, _ = name.strip().partition(":")
        # A provider misnamed, or an OpenAI-compatible server's model (`llama3.1:8b`): say how it was read.
        if colon and provider == "openai" and model == name.strip():
            why += f" ({prefix!r} is no provider LangChain knows, so the whole value was read as an OpenAI model)"
        other = _other_providers_model(name) if provider == "openai" else None
        if other is not None:
            why += f" (a bare name is OpenAI's; for {other}'s model write `{other}:{name.strip()}`)"
        raise unusable(variable, name, why)
    unsendable = _unsendable(provider)
    if unsendable is not None:
        raise unusable(variable, name, unsendable)
    if provider == "openai":
        _warn_if_misspelled(variable, name)
        other = _other_providers_model(name)
        if other is not None and not os.environ.get("OPENAI_BASE_URL"):
            logger.warning(
                "%s=%r is a bare name, sent to the OpenAI API as the model %r, which it does not serve; for "
                "%s's model write `%s:%s`",
                variable,
                name,
                name.strip(),
                other,
                other,
                name.strip(),
            )
        return openai_chat_model(model, timeout=timeout_s, max_retries=max_retries, **_own_async_client(timeout_s))
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(model, model_provider=provider, **_client_options(provider, timeout_s, max_retries))
    except ImportError as exc:  # LangChain's message names the package: `pip install langchain-<provider>`
        raise unusable(variable, name, str(exc)) from None
    except Exception as exc:  # the integration refused its settings (a missing key it requires, a bad value)
        raise unusable(variable, name, f"{provider} could not make the model: {type(exc).__name__}: {exc}") from None


class ModelConfig(Protocol):
    """What choosing a model reads of the settings: the summary model (MEMORY_AGENT_MEMORY_MODEL), the
    consolidation model and the summary timeout. MemorySettings has these groups (an entry point passes it)."""

    @property
    def memory(self) -> MemoryWindowSettings: ...

    @property
    def summary(self) -> SummarySettings: ...

    @property
    def consolidation(self) -> ConsolidationSettings: ...


def default_chat_model(settings: ModelConfig, role: ModelRole = "summary") -> BaseChatModel:
    """The model of `role` when none is passed: the summarizer is memory_model (no client retries: the runner's
    are recorded on the memory row); consolidation is consolidation_model, default memory_model (one client
    retry)."""
    timeout = settings.summary.timeout_s
    if role == "summary":
        return chat_model_from_setting(
            settings.memory.model, variable=MEMORY_MODEL_VARIABLE, role=role, timeout_s=timeout, max_retries=0
        )
    own = settings.consolidation.consolidation_model
    return chat_model_from_setting(
        own or settings.memory.model,
        variable=CONSOLIDATION_MODEL_VARIABLE if own else MEMORY_MODEL_VARIABLE,
        role=role,
        timeout_s=timeout,
        max_retries=1,
    )


def chat_model(model: BaseChatModel | str | None, settings: ModelConfig, role: ModelRole = "summary") -> BaseChatModel:
    """The model an application passed (a chat model, or a setting's value as a string), else the settings'."""
    if isinstance(model, str):
        timeout = settings.summary.timeout_s
        return chat_model_from_setting(
            model, variable="model", role=role, timeout_s=timeout, max_retries=0 if role == "summary" else 1
        )
    if model is None:
        return default_chat_model(settings, role)
    retries = getattr(model, "max_retries", None)
    if role == "summary" and isinstance(retries, int) and retries > 0:
        # Its client sleeps what a rate-limited provider asks (Anthropic's without a bound) inside a summary's
        # attempt, the row `processing` meanwhile; the summary's own attempts fail at once and back off instead.
        logger.warning(
            "The summary model passed (%s %r) retries in its client (max_retries=%s): a rate-limited call waits "
            "there, its summary `processing`; pass max_retries=0 to leave retries to the summary's attempts",
            type(model).__name__,
            model_name(model),
            retries,
        )
    return model
