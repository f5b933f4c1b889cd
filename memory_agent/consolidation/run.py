"""ConsolidationRun: how one run consolidates a user (the model, the settings it reads, the run's cap on summary
jobs, and whether notes already written are written again), handed to each step of the run as one value."""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel

from memory_agent.consolidation.config import ConsolidationConfig
from memory_agent.consolidation.guards import SummaryJobCap


@dataclass(frozen=True)
class ConsolidationRun:
    model: BaseChatModel
    settings: ConsolidationConfig
    cap: SummaryJobCap | None = None  # shared by the steps of one scheduler run of a user+project
    force: bool = False  # write a period's note again even when it exists
