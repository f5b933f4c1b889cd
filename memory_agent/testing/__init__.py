"""Testing with memory_agent: stand-ins, a real database per test, and the integrity checker.

- noop.py: NoopMemory, a RoundMemory that keeps nothing (a graph's own tests; what the benchmarks subtract).
- plugin.py: a pytest plugin (`pytest_plugins = ["memory_agent.testing.plugin"]`): one template database with
  the migrations applied per test run, a fresh copy of it per test, and the integrity checker run on it after
  the test (docs/how-to/test-with-postgres.md).
- queries.py: the only module here that runs statements: databases made and dropped, the integrity checker's
  rules, and generate_conversations (thousands of conversations written at once, for health tests and
  benchmarks).
May import: integrations/ (the protocol), db/, schemas, settings, resources, errors; never service/, evaluation/,
api/ nor cli/ (the evaluation and `eval recall` use its scratch database and direct writes). Its __init__ never
imports pytest.
"""

from memory_agent.testing.noop import NoopMemory
from memory_agent.testing.queries import check_integrity, find_violations, generate_conversations

__all__ = ["NoopMemory", "check_integrity", "find_violations", "generate_conversations"]
