"""Summarization: turning a `processing` memory row into a `completed` (or `failed`) one.

Owns MemoryAgent (prompt + one model call, no SQL: agent.py), the runner with retries and timeouts that
reads the window and records the outcome (runner.py), and the summarizer models: the default ChatOpenAI and
the offline one (models.py, offline.py).
May import: db/, conversation/ (text that PostgreSQL can store), errors, settings, schemas, resources.
Never jobs/, integrations/, observability/, cli/ nor service.py.
"""
