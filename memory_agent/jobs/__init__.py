"""Executors: where a `processing` row is summarized, outside the user's round.

Owns the Executor protocol and SummaryJobs, the narrow interface executors run (base.py), the choice of
an executor (executor.py), the inline executor (inline.py: a task on the memory loop plus a periodic
sweep) and the procrastinate one (procrastinate_executor.py: jobs in PostgreSQL run by `memory-agent worker`).
May import: db/, errors, settings. Never conversation/, summarize/, integrations/, cli/ nor service/:
what a job does comes in through SummaryJobs.
"""
