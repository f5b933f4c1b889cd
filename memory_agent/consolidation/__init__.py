"""Scheduled consolidation: daily notes, their compaction, weekly and monthly rollups, batch summaries of old
long-term items with a retention pass, the procrastinate schedules that run them for every user, and the manual
run of one user's period with the design's JSON shapes (summaries.py, for the HTTP API and the CLI).

Owns the tables of sql/migrations/0010_consolidation.sql and the queries of sql/queries/consolidation.sql (run by
queries.py's ConsolidationQueries only). Every job function takes the caller's psycopg AsyncConnection (autocommit, search_path on the memory_agent schema) and a `now` from an
injectable clock: SQL gets `now` as a parameter, so a test drives days of schedule in seconds. Every model call
goes through model.call_consolidation_model (one per period or batch, never per message), which returns its
token counts.
The tenant guards (guards.py: cooldown, summary jobs per run, concurrent-job slots, monthly cost ceiling) wrap
the schedules, and every model call is recorded in the cost ledger (memory_agent/long_term/ledger.py).
May import: db/, long_term/ (the ledger included), llm/, schemas, settings, errors, resources. Never jobs/, integrations/,
cli/, observability/ nor service/ (jobs/ registers this package's tasks, not the other way round).
"""

from memory_agent.consolidation.batches import BatchReport, run_batch_summaries
from memory_agent.consolidation.clock import Clock, ManualClock, system_clock
from memory_agent.consolidation.guards import SummaryJobCap, TenantBusy, tenant_slot
from memory_agent.consolidation.model import Insight, call_consolidation_model
from memory_agent.consolidation.nightly import NightlyReport, PeriodOutcome, consolidate_period, run_nightly
from memory_agent.consolidation.periods import Period, latest_period, rollups_due_after
from memory_agent.consolidation.reads import list_notes, search_key_insights
from memory_agent.consolidation.run import ConsolidationRun
from memory_agent.consolidation.schedule import ConsolidationRunner, register_tasks
from memory_agent.consolidation.summaries import PeriodSummary, SummarizeResult, summarize_latest

__all__ = [
    "BatchReport",
    "Clock",
    "ConsolidationRun",
    "ConsolidationRunner",
    "Insight",
    "ManualClock",
    "NightlyReport",
    "Period",
    "PeriodOutcome",
    "PeriodSummary",
    "SummarizeResult",
    "SummaryJobCap",
    "TenantBusy",
    "call_consolidation_model",
    "consolidate_period",
    "latest_period",
    "list_notes",
    "register_tasks",
    "rollups_due_after",
    "run_batch_summaries",
    "run_nightly",
    "search_key_insights",
    "summarize_latest",
    "system_clock",
    "tenant_slot",
]
