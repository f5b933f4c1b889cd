"""MemorySettings: every knob of memory_agent, in groups (`settings.database`, `settings.memory`,
`settings.recall`, …), each setting read from its MEMORY_AGENT_* environment variable when MemorySettings is built:
at the edges only (the service, the CLI, the servers). Each component takes its own group, or an options value
the service's wiring (service/_wiring.py) makes from several; none holds the whole MemorySettings.

A setting has one name: its variable is MEMORY_AGENT_ plus its group's prefix plus its field's name
(`settings.memory.rolling_window_size` is MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE, `settings.database.db_schema`
is MEMORY_AGENT_DB_SCHEMA), and `MemorySettings(...)` takes it under that variable's name without the prefix
(`memory_rolling_window_size=20`) or a whole group (`memory=MemoryWindowSettings(rolling_window_size=20)`).
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memory_agent.errors import ConfigurationError
from memory_agent.settings.base import ENV_PREFIX, ERRORS_HEADER, MAX_SECONDS, SettingsGroup, problems_of
from memory_agent.settings.consolidation import ConsolidationSettings
from memory_agent.settings.conversation import MemoryWindowSettings, RoundSettings, SummarySettings
from memory_agent.settings.database import DatabaseSettings, default_data_dir
from memory_agent.settings.guards import GuardSettings, ModelPrice
from memory_agent.settings.long_term import LongTermSettings, RecallSettings
from memory_agent.settings.service import DEFAULT_PROCESSING_TIMEOUT_S, ApiSettings, JobSettings, TracingSettings

__all__ = [
    "DEFAULT_PROCESSING_TIMEOUT_S",
    "MAX_SECONDS",
    "ApiSettings",
    "ConsolidationSettings",
    "DatabaseSettings",
    "GuardSettings",
    "JobSettings",
    "LongTermSettings",
    "MemorySettings",
    "MemoryWindowSettings",
    "ModelPrice",
    "RecallSettings",
    "RoundSettings",
    "SettingsGroup",
    "SummarySettings",
    "TracingSettings",
    "default_data_dir",
]


class MemorySettings(BaseModel):
    """Every setting, by group. `MemorySettings()` reads the environment; arguments win over it."""

    model_config = ConfigDict(frozen=True)

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    memory: MemoryWindowSettings = Field(default_factory=MemoryWindowSettings)
    summary: SummarySettings = Field(default_factory=SummarySettings)
    rounds: RoundSettings = Field(default_factory=RoundSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    long_term: LongTermSettings = Field(default_factory=LongTermSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    guards: GuardSettings = Field(default_factory=GuardSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)

    def __init__(self, **values: Any) -> None:
        super().__init__(**build_groups(values))

    def replace(self, **values: Any) -> MemorySettings:
        """These settings with some changed (by name, as MemorySettings takes them), checked as when built."""
        given, lines = route(values)
        merged = {group: {**getattr(self, group).model_dump(), **changes} for group, changes in given.items()}
        return MemorySettings(**merged, **dict.fromkeys(lines))

    @property
    def summary_cadence(self) -> int:
        """New messages since the latest memory before another summary starts: memory_min_new_messages, else the
        default cadence, lowered to the gap cap when that is smaller (a longer cadence would have every round
        between two summaries cut its gap, dropping messages no memory covers yet)."""
        cadence = self.memory.summary_cadence
        return cadence if self.memory.min_new_messages is not None else min(cadence, self.gap_message_cap)

    @property
    def gap_message_cap(self) -> int:
        """Most stored messages given to the model after the memory (MEMORY_AGENT_MAX_GAP_MESSAGES)."""
        cap = self.rounds.max_gap_messages
        return cap if cap is not None else 2 * self.memory.rolling_window_size


@functools.cache
def groups() -> dict[str, type[SettingsGroup]]:
    """Each group's attribute on MemorySettings and its class."""
    return {name: field.annotation for name, field in MemorySettings.model_fields.items()}  # type: ignore[misc]


@functools.cache
def argument_names() -> dict[str, tuple[str, str]]:
    """Each setting's argument name (its variable without MEMORY_AGENT_, lower case) -> (group, field)."""
    names = {}
    for group, cls in groups().items():
        for field in cls.model_fields:
            names[cls.env_name(field).removeprefix(ENV_PREFIX).lower()] = (group, field)
    return names


def route(values: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The arguments each group is given (settings by name, or whole groups as objects or dicts), and the
    arguments that are no setting."""
    names = argument_names()
    given: dict[str, dict[str, Any]] = {group: {} for group in groups()}
    unknown = []
    for name, value in values.items():
        whole = value.model_dump(exclude_unset=True) if isinstance(value, SettingsGroup) else value
        if name in given and (isinstance(whole, dict) or name.lower() not in names):  # `recall=False` is a setting
            given[name] = {**whole, **given[name]} if isinstance(whole, dict) else {"": whole}
        elif name.lower() in names:
            group, field = names[name.lower()]
            given[group][field] = value
        else:
            unknown.append(name)
    return given, unknown


# Variables read outside MemorySettings: the demo's chat model, `memory-agent mcp`'s user and tenant, the
# inspector tests' screenshots; the test suite's servers (MEMORY_AGENT_TEST_*).
OTHER_VARIABLES = frozenset(
    {
        "MEMORY_AGENT_DEMO_CHAT_MODEL",
        "MEMORY_AGENT_MCP_USER_ID",
        "MEMORY_AGENT_MCP_TENANT_ID",
        "MEMORY_AGENT_SCREENSHOTS",
    }
)
logger = logging.getLogger(__name__)


def unknown_variables(environ: dict[str, str] | os._Environ[str]) -> list[tuple[str, str | None]]:
    """Each MEMORY_AGENT_* variable of `environ` that names no setting, with the closest one's name (None: none
    is close): a misspelled variable would otherwise be ignored without a word."""
    known = sorted({ENV_PREFIX + name.upper() for name in argument_names()} | OTHER_VARIABLES)
    found: list[tuple[str, str | None]] = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX):
            # A misspelled prefix (MEMORY_AGNET_..., MEMORYAGENT_...): only a name this close to a setting's.
            near = difflib.get_close_matches(upper, known, n=1, cutoff=0.9)
            if near and upper[:6] == ENV_PREFIX[:6]:
                found.append((name, near[0]))
            continue
        if upper in known or upper.startswith(ENV_PREFIX + "TEST_"):
            continue
        # Compared without the prefix every name shares, which would make any two names look alike.
        suffixes = [k.removeprefix(ENV_PREFIX) for k in known]
        close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), suffixes, n=1, cutoff=0.6)
        found.append((name, ENV_PREFIX + close[0] if close else None))
    return found


@functools.cache
def warn_unknown_variables() -> None:
    """Log a WARNING, once per process, for each MEMORY_AGENT_* variable that is no setting."""
    for name, close in unknown_variables(os.environ):
        hint = f"did you mean {close}?" if close else "see the settings reference for the names"
        logger.warning("%s is not a memory_agent setting and is ignored; %s", name, hint)


def build_groups(values: dict[str, Any]) -> dict[str, SettingsGroup]:
    """Every group, from the arguments given and the environment; the problems of every group are reported
    together."""
    warn_unknown_variables()
    given, unknown = route(values)
    lines = [f"{name}: not a memory_agent setting" for name in unknown]
    built = {}
    for group, cls in groups().items():
        if "" in given[group]:
            lines.append(f"{group}: expected {cls.__name__} or a dict, got {type(given[group]['']).__name__}")
            continue
        try:
            built[group] = cls(**given[group])
        except ConfigurationError as exc:
            lines += problems_of(exc)
    if not lines:
        lines += _cross_group_problems(built)
    if lines:
        raise ConfigurationError(ERRORS_HEADER + "\n  " + "\n  ".join(lines))
    return built


def _cross_group_problems(built: dict[str, Any]) -> list[str]:
    """The problems of settings of two groups together."""
    cadence, cap = built["memory"].min_new_messages, built["rounds"].max_gap_messages
    if cadence is not None and cap is not None and cadence > cap:
        # Between two summaries the gap grows to the cadence: every round would cut it, dropping messages
        # that no memory covers yet.
        return [
            f"MEMORY_AGENT_MEMORY_MIN_NEW_MESSAGES ({cadence}) must be at most MEMORY_AGENT_MAX_GAP_MESSAGES "
            f"({cap}), or every round between two summaries would leave out messages no memory covers yet"
        ]
    return []
