"""A day with more material than the consolidation model's context: consolidated in parts within
MEMORY_AGENT_CONSOLIDATION_MAX_INPUT_TOKENS, then combined, through a context-limited model over HTTP (the local
fake OpenAI server refuses a prompt past its limit, as a provider does)."""

from __future__ import annotations

from datetime import timedelta

from memory_agent.consolidation import ConsolidationRun
from memory_agent.consolidation.nightly import run_nightly
from memory_agent.consolidation.parts import split_material
from memory_agent.consolidation.periods import utc_day
from memory_agent.llm import OfflineConsolidationModel, openai_chat_model
from memory_agent.long_term import ItemOrigin, ItemScope, remember
from memory_agent.settings import MemorySettings
from tests.conftest import query
from tests.consolidation.conftest import day
from tests.long_term.conftest import items


def test_parts_keep_order_fit_the_budget_and_cut_an_overlong_line():
    lines = [f"- note {n} " + "w" * 30 for n in range(100)] + ["- " + "x" * 10_000]
    parts = split_material(lines, budget_tokens=120)
    assert len(parts) > 1 and [line for part in parts for line in part][:100] == lines[:100]
    assert all(sum((len(line) + 1) // 4 + 1 for line in part) <= 120 for part in parts)
    assert parts[-1] == [lines[-1][:475]]  # cut to what fits a part alone


async def test_a_day_over_the_models_context_is_consolidated_in_parts(conn, fake_openai, database_url):
    await remember(
        conn,
        scope=ItemScope(tenant_id="acme", user_id="alice"),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        items=items(decisions=[(f"step_{n}", f"Decided to ship step {n} of the migration plan") for n in range(600)]),
        now=day(0, 12),
    )
    fake_openai.max_prompt_chars = 12_000
    model = openai_chat_model("fake-small-context", max_retries=0, timeout=30)
    config = MemorySettings(
        consolidation_enabled=True, consolidation_max_input_tokens=2_500
    )  # ~10,000 characters a prompt
    report = await run_nightly(conn, "acme", "alice", day(1, 5), run=ConsolidationRun(model, config))

    assert [o.status for o in report.outcomes] == ["complete"]
    prompts = fake_openai.structured_requests()
    assert len(prompts) >= 6  # the parts, then the call(s) combining them
    assert all(sum(len(str(m.get("content"))) for m in p["messages"]) <= 12_000 for p in prompts)
    assert query(database_url, "SELECT covered_until FROM consolidation_schedules") == [
        (utc_day(day(1, 5)) - timedelta(days=1),)
    ]
    ((notes_consolidated, calls),) = query(
        database_url,
        "SELECT n.notes_consolidated, (SELECT count(*) FROM llm_calls WHERE purpose = 'consolidation')"
        " FROM consolidation_notes AS n",
    )
    assert notes_consolidated == 600 and calls == len(prompts)  # every call in the ledger


class HostileConsolidator(OfflineConsolidationModel):
    """Answers with insights and a text holding a NUL and a lone surrogate (model output is untrusted)."""

    def answer(self, material: str) -> dict:
        return {
            "summary": "Decided things \x00 and \ud800.",
            "insights": [{"text": "Ships step \ud800 one", "importance": 0.9}, {"text": "nul \x00", "importance": 0.8}],
        }


async def test_a_consolidation_answer_with_nul_or_lone_surrogates_is_stored_cleaned(conn, database_url):
    await remember(
        conn,
        scope=ItemScope(tenant_id="acme", user_id="alice"),
        source=ItemOrigin(conversation_id=None, memory_id=None),
        items=items(decisions=[("step_1", "Decided to ship step 1")]),
        now=day(0, 12),
    )
    report = await run_nightly(
        conn,
        "acme",
        "alice",
        day(1, 5),
        run=ConsolidationRun(HostileConsolidator(), MemorySettings(consolidation_enabled=True)),
    )
    assert [o.status for o in report.outcomes] == ["complete"]
    ((consolidated, key_insights),) = query(database_url, "SELECT consolidated, key_insights FROM consolidation_notes")
    assert consolidated == "Decided things \ufffd and ?." and key_insights == ["Ships step ? one", "nul \ufffd"]
