"""The grouped settings keep every MEMORY_AGENT_* name users set before the groups existed: each variable, and
the same name as a MemorySettings(...) argument, lands on its group's attribute with the same meaning."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_agent.errors import ConfigurationError
from memory_agent.settings import MemorySettings, MemoryWindowSettings, RecallSettings
from tools import docs_reference

# Every variable a user could set before the settings were grouped, with a valid value other than its default.
NAMES = {
    "MEMORY_AGENT_DATABASE_URL": "postgresql://somewhere/db",
    "MEMORY_AGENT_DB_SCHEMA": "chat_memory",
    "MEMORY_AGENT_DATA_DIR": "/srv/pgdata",
    "MEMORY_AGENT_EMBEDDED_INSTALL_DIR": "/srv/postgres",
    "MEMORY_AGENT_AUTO_MIGRATE": "false",
    "MEMORY_AGENT_POOL_MIN_SIZE": "2",
    "MEMORY_AGENT_POOL_MAX_SIZE": "7",
    "MEMORY_AGENT_CONNECT_TIMEOUT_S": "3.5",
    "MEMORY_AGENT_MEMORY_ROLLING_WINDOW_SIZE": "20",
    "MEMORY_AGENT_MEMORY_SUMMARIZE_AFTER_SEQ": "9",
    "MEMORY_AGENT_MEMORY_MIN_NEW_MESSAGES": "3",
    "MEMORY_AGENT_MEMORY_MODEL": "some-model",
    "MEMORY_AGENT_MEMORY_MAX_WORDS": "120",
    "MEMORY_AGENT_MEMORY_MAX_TOKENS": "400",
    "MEMORY_AGENT_MAX_GAP_MESSAGES": "40",
    "MEMORY_AGENT_INJECTION_MODE": "system",
    "MEMORY_AGENT_MAX_CONTEXT_TOKENS": "8000",
    "MEMORY_AGENT_MAX_MESSAGE_TOKENS": "900",
    "MEMORY_AGENT_RECALL": "false",
    "MEMORY_AGENT_RECALL_MAX_TOKENS": "1500",
    "MEMORY_AGENT_RECALL_MAX_TURNS": "4",
    "MEMORY_AGENT_RECALL_MAX_TURN_CHARS": "500",
    "MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG": "simple",
    "MEMORY_AGENT_RECALL_TRGM_THRESHOLD": "0.4",
    "MEMORY_AGENT_EMBEDDINGS": "hashing",
    "MEMORY_AGENT_USER_ID_KEY": "account",
    "MEMORY_AGENT_TENANT_ID_KEY": "org",
    "MEMORY_AGENT_LONG_TERM": "false",
    "MEMORY_AGENT_SUMMARY_MIN_CLUSTER_ITEMS": "4",
    "MEMORY_AGENT_PROJECT": "atlas",
    "MEMORY_AGENT_ENVIRONMENT": "staging",
    "MEMORY_AGENT_MULTITASK_STRATEGY": "reject",
    "MEMORY_AGENT_MULTITASK_TIMEOUT_S": "60",
    "MEMORY_AGENT_ROUND_LEASE_S": "90",
    "MEMORY_AGENT_EXECUTOR": "procrastinate",
    "MEMORY_AGENT_SUMMARY_TIMEOUT_S": "30",
    "MEMORY_AGENT_SUMMARY_MAX_ATTEMPTS": "5",
    "MEMORY_AGENT_SUMMARY_RETRY_BACKOFF_S": "2.5",
    "MEMORY_AGENT_PROCESSING_TIMEOUT_S": "200",
    "MEMORY_AGENT_SWEEP_INTERVAL_S": "15",
    "MEMORY_AGENT_ANALYZE_INTERVAL_S": "0",
    "MEMORY_AGENT_SWEEP_CRON": "*/5 * * * *",
    "MEMORY_AGENT_DRAIN_TIMEOUT_S": "12",
    "MEMORY_AGENT_EVENT_LOOP": "caller",
    "MEMORY_AGENT_CONSOLIDATION_ENABLED": "true",
    "MEMORY_AGENT_SCHEDULE_TIME": "04:30",
    "MEMORY_AGENT_RETAIN_DAYS": "10",
    "MEMORY_AGENT_CONSOLIDATION_MODEL": "notes-model",
    "MEMORY_AGENT_KEY_INSIGHTS_COUNT": "3",
    "MEMORY_AGENT_ROLLUP_MIN_IMPORTANCE": "0.7",
    "MEMORY_AGENT_BATCH_SUMMARIES_ENABLED": "true",
    "MEMORY_AGENT_BATCH_SUMMARIES_SCHEDULE": "weekly",
    "MEMORY_AGENT_INTERVAL_DAYS": "3",
    "MEMORY_AGENT_MIN_AGE_DAYS": "2",
    "MEMORY_AGENT_MAX_MEMORIES_PER_BATCH": "20",
    "MEMORY_AGENT_KEEP_ORIGINAL_DAYS": "90",
    "MEMORY_AGENT_TENANT_COOLDOWN_S": "30",
    "MEMORY_AGENT_MAX_SUMMARY_JOBS_PER_RUN": "8",
    "MEMORY_AGENT_MAX_CONCURRENT_JOBS_PER_TENANT": "2",
    "MEMORY_AGENT_TENANT_SLOT_RETRY_S": "10",
    "MEMORY_AGENT_MONTHLY_COST_CEILING": "25",
    "MEMORY_AGENT_LLM_PRICES": '{"m": {"input": 1, "output": 2}}',
    "MEMORY_AGENT_APP_MODEL": "app-model",
    "MEMORY_AGENT_API_MAX_BODY_BYTES": "4096",
    "MEMORY_AGENT_RECALL_MAX_QUERY_CHARS": "500",
    "MEMORY_AGENT_SUMMARY_MAX_ITEMS": "60",
    "MEMORY_AGENT_SUMMARY_MAX_CLUSTER_MEMBERS": "30",
    "MEMORY_AGENT_CONSOLIDATION_MAX_INPUT_TOKENS": "5000",
}
PATHS = {row.env: row.path for row in docs_reference.settings()}


def attribute(settings: MemorySettings, path: str) -> object:
    value: object = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


def test_every_earlier_variable_is_still_a_setting():
    assert sorted(set(NAMES) - set(PATHS)) == []
    assert len(PATHS) == len(set(PATHS.values()))  # one variable per attribute


def test_each_variable_and_its_argument_set_the_same_attribute(monkeypatch):
    for env, value in NAMES.items():
        default = attribute(MemorySettings(), PATHS[env])
        with monkeypatch.context() as patch:
            patch.setenv(env, value)
            from_env = attribute(MemorySettings(), PATHS[env])
        argument = env.removeprefix("MEMORY_AGENT_").lower()
        from_argument = attribute(MemorySettings(**{argument: from_env}), PATHS[env])
        assert from_env != default, env
        assert from_argument == from_env, env
        if isinstance(from_env, str | Path):
            assert str(from_env) == value, env


def test_a_group_given_whole_reads_the_environment_for_the_rest(monkeypatch):
    monkeypatch.setenv("MEMORY_AGENT_MEMORY_MODEL", "env-model")
    for given in (MemoryWindowSettings(rolling_window_size=20), {"rolling_window_size": 20}):
        settings = MemorySettings(memory=given, memory_max_words=100)
        assert (settings.memory.rolling_window_size, settings.memory.model) == (20, "env-model")
        assert settings.memory.max_words == 100  # an argument by name joins the group given whole
    changed = settings.replace(executor="procrastinate", recall=False)
    assert (changed.jobs.executor, changed.rounds.recall, changed.memory.rolling_window_size) == (
        "procrastinate",
        False,
        20,
    )


def test_bad_settings_of_several_groups_are_reported_together_by_variable():
    with pytest.raises(ConfigurationError) as caught:
        MemorySettings(
            pool_max_size=0, recall_max_turns=0, schedule_time="25:00", recall_time_zone="Europe/Lyon", unknown_knob=1
        )
    message = str(caught.value)
    for named in (
        "MEMORY_AGENT_POOL_MAX_SIZE (got 0)",
        "MEMORY_AGENT_RECALL_MAX_TURNS (got 0)",
        "MEMORY_AGENT_RECALL_TIME_ZONE (got 'Europe/Lyon'): 'Europe/Lyon' is no time zone",
        "MEMORY_AGENT_SCHEDULE_TIME (got '25:00')",
        "unknown_knob: not a memory_agent setting",
    ):
        assert named in message
    with pytest.raises(ConfigurationError, match="MEMORY_AGENT_RECALL_TEXT_SEARCH_CONFIG"):
        RecallSettings(text_search_config="english; DROP TABLE items")
    with pytest.raises(ConfigurationError, match="bogus: not a setting of RecallSettings"):
        RecallSettings(bogus=1)


def test_a_summary_cap_below_the_words_asked_is_refused():
    """A cap under 2 tokens a word refuses the summaries that keep to memory_max_words (written summaries are
    1.45-1.8 tokens a word by the estimate): every summary would fail (before: accepted, down to 1 token)."""
    for tokens in (1, 299):
        with pytest.raises(
            ConfigurationError, match=r"MEMORY_AGENT_MEMORY_MAX_TOKENS \(.*2 x MEMORY_AGENT_MEMORY_MAX_WORDS"
        ):
            MemorySettings(memory_max_words=150, memory_max_tokens=tokens)
    assert MemorySettings(memory_max_words=150, memory_max_tokens=300).memory.max_tokens_cap == 300
