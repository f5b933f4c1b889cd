"""SummaryOptions: what the summary runner reads of the settings, as one value built where the settings are read
(the service's wiring), as a worker takes its options: the summary group, the guards, the long-term group, the
time a `processing` row may stay quiet and the summary model's name."""

from __future__ import annotations

from dataclasses import dataclass

from memory_agent.settings import GuardSettings, LongTermSettings, SummarySettings


@dataclass(frozen=True)
class SummaryOptions:
    summary: SummarySettings  # MEMORY_AGENT_SUMMARY_*: attempts, timeout, backoff, items, clusters
    guards: GuardSettings  # prices, the monthly cost ceiling, summary jobs per run
    long_term: LongTermSettings  # whether items are extracted; the project and environment they are filed under
    processing_timeout_s: float  # MEMORY_AGENT_PROCESSING_TIMEOUT_S: a summary's retries stay inside it
    model_name: str  # MEMORY_AGENT_MEMORY_MODEL: the ledger's name for a cluster summary's calls
