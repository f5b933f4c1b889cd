"""`memory-agent consolidate` and `memory-agent summaries` on the real clock: items of the last fourteen days."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from typer.testing import CliRunner

from memory_agent.cli.main import app
from memory_agent.long_term import ItemOrigin, ItemScope, remember
from tests.conftest import query
from tests.long_term.conftest import items


def invoke(database_url: str, *args: str) -> Any:
    env = {"MEMORY_AGENT_DATABASE_URL": database_url, "COLUMNS": "250", "NO_COLOR": "1", "OPENAI_API_KEY": ""}
    return CliRunner().invoke(app, list(args), env=env)


async def test_consolidate_and_summaries(conn, database_url):
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    for n in range(1, 15):
        await remember(
            conn,
            scope=ItemScope(tenant_id="default", user_id="alice"),
            source=ItemOrigin(conversation_id=None, memory_id=None),
            items=items(decisions=[(f"choice_{n}", f"Decided on option {n}")]),
            now=today - timedelta(days=n),
        )

    due = invoke(database_url, "consolidate", "--due", "--json")
    assert due.exit_code == 0, due.output
    (outcome,) = json.loads(due.stdout)
    # The runs of these fourteen days meet two Sundays, whatever today is.
    weeklies = query(database_url, "SELECT count(*) FROM consolidation_notes WHERE period = 'weekly'")[0][0]
    assert weeklies == 2
    assert outcome["userId"] == "alice" and outcome["outcome"].startswith(f"14 days: 14 daily, {weeklies} weekly")

    again = invoke(database_url, "consolidate", "--user", "alice", "--period", "weekly", "--json")
    assert again.exit_code == 0, again.output
    first = json.loads(again.stdout)
    assert first["status"] == "exists" and isinstance(first["summaryId"], int)
    forced = json.loads(
        invoke(database_url, "consolidate", "--user", "alice", "--period", "weekly", "--force", "--json").stdout
    )
    assert forced["status"] == "complete" and forced["notesConsolidated"] == 7
    assert forced["summaryId"] == first["summaryId"]  # the same note, written again
    assert query(database_url, "SELECT count(*) FROM consolidation_notes WHERE period = 'weekly'") == [(weeklies,)]

    listed = invoke(database_url, "summaries", "--period", "weekly", "--limit", "1", "--json")
    assert listed.exit_code == 0, listed.output
    (weekly,) = json.loads(listed.stdout)
    assert weekly["summaryId"] == forced["summaryId"] and weekly["notesConsolidated"] == 7
    assert (weekly["startDate"], weekly["endDate"]) == (forced["startDate"], forced["endDate"])
    assert len(weekly["keyInsights"]) == 5 and all("Decided on option" in k for k in weekly["keyInsights"])

    table = invoke(database_url, "summaries", "--period", "weekly")
    assert table.exit_code == 0 and "default/alice" in table.stdout and forced["startDate"] in table.stdout

    bad = invoke(database_url, "summaries", "--period", "yearly")
    assert bad.exit_code == 2 and "period must be one of daily, weekly, monthly" in bad.output
    nobody = invoke(database_url, "consolidate", "--period", "weekly")
    assert nobody.exit_code == 2 and "--user" in nobody.output
    # A user the tenant holds nothing of is an error, as the HTTP route's 404 (it said nothing_to_consolidate).
    unknown = invoke(database_url, "consolidate", "--user", "nobody-here", "--period", "weekly")
    assert unknown.exit_code == 2 and "tenant 'default' holds nothing of user 'nobody-here'" in unknown.output
    other_tenant = invoke(database_url, "consolidate", "--user", "alice", "--tenant", "acme", "--period", "weekly")
    assert other_tenant.exit_code == 2 and "holds nothing of user 'alice'" in other_tenant.output


def test_a_conversations_own_scope_cannot_be_named(database_url):
    for args in (("consolidate", "--user", "conversation:t"), ("summaries", "--user", "conversation:t")):
        result = invoke(database_url, *args)
        assert result.exit_code != 0 and "reserved for the scope of conversations" in result.output, result.output


def test_bad_arguments_are_named_before_the_model_or_the_user_is_looked_at(database_url):
    # A bad --period was reported as "holds nothing of user" (the user was looked up first), and a missing
    # --user as the model's missing OpenAI key (the model was made first): the argument was never named.
    env = {"MEMORY_AGENT_DATABASE_URL": database_url, "COLUMNS": "250", "NO_COLOR": "1", "OPENAI_API_KEY": ""}
    unusable = {**env, "MEMORY_AGENT_MEMORY_MODEL": "gpt-4.1-mini", "OPENAI_BASE_URL": ""}
    for args, said, environment in (
        (("consolidate", "--user", "nobody-here", "--period", "yearly"), "period must be one of", env),
        (("consolidate", "--user", "alice", "--period", "yearly"), "period must be one of", unusable),
        (("consolidate", "--period", "weekly"), "give --user USER", unusable),
    ):
        result = CliRunner().invoke(app, list(args), env=environment)
        assert result.exit_code == 2 and said in result.output, (args, result.output)
