"""One staleness rule: the trigger rule (Python, on trigger_state's age) and the reclaimer (SQL, memory_is_stuck)
call the same `processing` row stuck, at the timeout and either side of it; one default timeout."""

from __future__ import annotations

import pytest

from memory_agent.conversation.window import processing_is_stuck
from memory_agent.settings import DEFAULT_PROCESSING_TIMEOUT_S, MemorySettings
from tests.conftest import query


@pytest.mark.parametrize("quiet_s", [299.999, 300.0, 300.001, 0.0, 3600.0])
def test_python_and_sql_call_the_same_row_stuck(database_url, quiet_s):
    (sql_says,) = query(
        database_url,
        "SELECT memory_is_stuck('processing', NULL, t - make_interval(secs => %s), make_interval(secs => 300), t) "
        "FROM (SELECT timestamptz '2026-01-01 12:00:00+00' AS t) AS at",
        (quiet_s,),
    )[0]
    assert processing_is_stuck(quiet_s, 300.0) is sql_says


def test_one_default_timeout(database_url):
    assert MemorySettings().jobs.processing_timeout_s == DEFAULT_PROCESSING_TIMEOUT_S
    # A session that does not set it (psql) gets the same from the views' processing_timeout().
    assert query(database_url, "SELECT extract(epoch FROM processing_timeout())::float8") == [
        (DEFAULT_PROCESSING_TIMEOUT_S,)
    ]
