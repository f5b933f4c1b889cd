"""One definition per rule: the token estimate, the default tenant and the implicit scope's prefix are each stated
in one module and imported everywhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import memory_agent

ROOT = Path(memory_agent.__file__).parent


def _code_lines(pattern: str) -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(pattern, code):
                found.append(f"{path.relative_to(ROOT)}:{number}")
    return found


@pytest.mark.parametrize(
    ("pattern", "home"),
    [
        (r"import count_tokens_approximately|count_tokens_approximately\(", "tokens.py"),
        (r"\bCHARS_PER_TOKEN\s*=", "tokens.py"),
        (r"\bDEFAULT_TENANT_ID\s*=", "schemas/keys.py"),
        (r"^[A-Z_]+\s*=\s*['\"]conversation:['\"]", "schemas/keys.py"),
        (r"\bDEFAULT_PROCESSING_TIMEOUT_S\s*=", "settings/service.py"),
    ],
)
def test_a_rule_is_defined_in_one_module(pattern, home):
    found = _code_lines(pattern)
    assert found and {line.rsplit(":", 1)[0] for line in found} == {home}, found


def test_the_token_estimate_is_langchains_approximation():
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.messages.utils import count_tokens_approximately

    from memory_agent.tokens import count_tokens

    messages = [HumanMessage("héllo " * 50), AIMessage("a reply")]
    assert count_tokens(messages) == count_tokens_approximately(messages) > 0


def test_health_reads_the_definitions_instead_of_restating_them():
    from memory_agent import resources

    queries = resources.queries()
    assert "latest_memory" in queries["health_lag_totals"]
    assert "JOIN memory_health " in queries["health_conversations"]
    assert "FROM summary_model_stats " in queries["health_model_stats"]
    assert queries["health_round_totals"].strip() == "SELECT * FROM memory_round_totals"
    assert queries["health_summary_totals"].strip() == "SELECT * FROM memory_summary_totals"
    for name, statement in queries.items():
        if name.startswith("health_"):
            # The served memory (latest_memory) and a conversation's versions (memory_health) are not restated.
            assert "end_sequence DESC" not in statement and "FROM memory AS m\n    WHERE m.user_id" not in statement, (
                name
            )


def test_the_store_reads_when_a_key_was_first_put_from_one_view():
    from memory_agent import resources

    queries = resources.queries()
    for name in ("store_get", "store_search", "store_rows_by_id"):
        assert "item_versions" in queries[name] and "min(f.created_at)" not in queries[name], name


def test_the_http_recall_answer_carries_every_field_of_a_hit():
    """RecalledMemory is the HTTP contract of a RecallHit (its fields described for the OpenAPI document): a field
    added to the hit is one the route must answer with too, not one it drops in silence."""
    import dataclasses

    from memory_agent.api.recall import RecalledMemory
    from memory_agent.long_term.recall.block import RecallHit

    hit_fields = [field.name for field in dataclasses.fields(RecallHit)]
    assert set(RecalledMemory.model_fields) == {*hit_fields, "is_summary"}
