"""When a procrastinate job that raised runs again: only when its error may pass (errors.is_transient: the
database or the model server was away, timed out or rolled back a conflict), with exponential waits. A job whose
error would recur (an SQL statement the server refuses, a model answer that does not parse, a summary recorded
`failed` on its row) ends `failed` at once instead of being retried to the same end.

Periodic tasks (the sweep, the cluster safety net) take no retry: their next tick is the retry.
"""

from __future__ import annotations

from typing import Any

import procrastinate

from memory_agent.errors import is_transient

# Waits of 2, 4, 8, 16 and 32 seconds: about a minute for a restarting database or model server, well inside
# the stale-row timeout that reclaims a summary whose retries all failed.
MAX_RETRIES = 5
EXPONENTIAL_WAIT_S = 2


class RetryTransient(procrastinate.RetryStrategy):
    """procrastinate's RetryStrategy, for transient errors only."""

    def get_retry_decision(self, *, exception: BaseException, job: Any) -> procrastinate.RetryDecision | None:
        if not is_transient(exception):
            return None
        return super().get_retry_decision(exception=exception, job=job)


RETRY_TRANSIENT = RetryTransient(max_attempts=MAX_RETRIES, exponential_wait=EXPONENTIAL_WAIT_S)
