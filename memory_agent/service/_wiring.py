"""What each component of an open service is given of the settings: the edge where MemorySettings (the
environment, read once when it is built) is cut into the groups and options each component takes. Below the
service no component holds the whole MemorySettings: a component reads its own group (RoundLeases the rounds
group, RoundEnd the guards, LongTermMemory recall's group) or an options value made here from several."""

from __future__ import annotations

from typing import Any

from memory_agent.conversation.round_start import StartOptions
from memory_agent.conversation.window import TriggerOptions
from memory_agent.jobs.executor import WorkerOptions
from memory_agent.schemas.keys import zone_named
from memory_agent.settings import MemorySettings
from memory_agent.summarize.options import SummaryOptions


def trigger_options(settings: MemorySettings) -> TriggerOptions:
    return TriggerOptions(
        summarize_after_seq=settings.memory.summarize_after_seq,
        window_size=settings.memory.rolling_window_size,
        min_new_messages=settings.summary_cadence,
        processing_timeout_s=settings.jobs.processing_timeout_s,
    )


def start_options(settings: MemorySettings) -> StartOptions:
    zone = settings.recall.time_zone
    return StartOptions(
        rounds=settings.rounds,
        gap_cap=settings.gap_message_cap,
        time_zone=zone_named(zone, "MEMORY_AGENT_RECALL_TIME_ZONE") if zone else None,
    )


def summary_options(settings: MemorySettings) -> SummaryOptions:
    return SummaryOptions(
        summary=settings.summary,
        guards=settings.guards,
        long_term=settings.long_term,
        processing_timeout_s=settings.jobs.processing_timeout_s,
        model_name=settings.memory.model,
    )


def worker_options(settings: MemorySettings) -> WorkerOptions:
    """The executors' options; with consolidation or batch summaries enabled, what makes their runner on the pool
    (the consolidation model named by the settings, the consolidation group and the guards)."""
    group = settings.consolidation

    def consolidation(pool: Any) -> Any:
        # Imported here: only deployments that enable it load the consolidation package.
        from memory_agent.consolidation import ConsolidationRunner
        from memory_agent.llm import default_chat_model

        return ConsolidationRunner(pool, default_chat_model(settings, "consolidation"), settings)

    enabled = group.consolidation_enabled or group.batch_summaries_enabled
    return WorkerOptions(settings.jobs, settings.database.auto_migrate, consolidation if enabled else None)
