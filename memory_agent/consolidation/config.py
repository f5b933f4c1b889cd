"""ConsolidationConfig: what consolidation reads of the settings, its own group and the guards. MemorySettings
has both (an entry point passes it); nothing in this package reads any other group."""

from __future__ import annotations

from typing import Protocol

from memory_agent.settings import ConsolidationSettings, GuardSettings


class ConsolidationConfig(Protocol):
    @property
    def consolidation(self) -> ConsolidationSettings: ...

    @property
    def guards(self) -> GuardSettings: ...
