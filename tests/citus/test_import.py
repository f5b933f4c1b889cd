"""An import on Citus: its batches, their id lookups and its conversation row's counts are router queries of the
user's shard, in one distributed transaction; a duplicate id two batches back is refused and nothing is kept."""

from __future__ import annotations

import pytest

from memory_agent.errors import InvalidInputError
from memory_agent.llm.offline import OfflineSummaryModel
from tests.citus.conftest import query
from tests.integration.test_import_thread import clock, records


async def test_a_streamed_import_and_its_duplicate_id_check_run_on_the_users_shard(open_memory, citus_url, schema):
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    said = [{**record, "id": f"m-{n}"} for n, record in enumerate(records(2500))]
    report = await memory.transfers.import_messages("long", iter(said), user_id="ana", summarize=False)
    assert (report.messages, report.rounds) == (2500, 1250)
    counts = "SELECT next_sequence, round_count FROM conversations WHERE user_id = 'ana'"
    assert query(citus_url, schema, counts) == [(2500, 1250)]
    twice = [*said[:-1], {**said[-1], "id": "m-0"}]
    with pytest.raises(InvalidInputError, match="message 2499: field 'id' \\('m-0'\\) is message 0's too"):
        await memory.transfers.import_messages("twice", iter(twice), user_id="bo", summarize=False)
    assert query(citus_url, schema, "SELECT count(*) FROM messages WHERE user_id = 'bo'") == [(0,)]
    assert query(citus_url, schema, "SELECT count(*) FROM conversation_owners WHERE user_id = 'bo'") == [(0,)]
