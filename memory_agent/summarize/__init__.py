"""Summarization: turning a `processing` memory row into a `completed` (or `failed`) one.

Owns MemoryAgent (prompt + model call, one retry on output that does not validate, no SQL: agent.py), the
runner with retries and timeouts that reads the window and records the outcome (a failing conversation is
logged at a bounded rate and backs off: failures.py) — the version's structured
items written to the long-term tier in the same transaction (runner.py), its clusters refreshed and its items
embedded after it, with the periodic safety net for what that missed (follow_ups.py). Its model is made by
llm/: any provider the settings name (models.py), the offline one only when named (offline.py).
May import: db/, conversation/ (text that PostgreSQL can store), long_term/, errors, settings, schemas, resources.
Never jobs/, integrations/, observability/, cli/ nor service/.
"""
