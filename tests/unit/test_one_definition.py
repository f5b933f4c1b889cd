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
    for name, statement in queries.items():
        if name.startswith("health_"):
            # The served memory (latest_memory) and a conversation's versions (memory_health) are not restated.
            assert "end_sequence DESC" not in statement and "FROM memory AS m\n    WHERE m.user_id" not in statement, (
                name
            )
