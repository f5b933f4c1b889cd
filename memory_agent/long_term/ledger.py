"""The cost ledger: every LLM call memory_agent makes, with its tokens and cost, in `llm_calls`.

The calls are the conversation summarizer's (summarize/agent.py, its retry included), the cluster summaries'
(the same agent), and consolidation's (consolidation/model.py: call_consolidation_model), each an llm.LLMCall;
purpose 'app' is the
app's own model, recorded by the round from its answers' usage. Cost is priced at call time from the price
table (MEMORY_AGENT_LLM_PRICES: USD, or any one currency, per 1M input and output tokens per model); a model
the table does not name costs 0 and its row says priced = false, its tokens still counted. A call that fails
without an answer records nothing: no usage is known.

Model code has no SQL: it notes each answer's usage in the CallLog of the job it runs in (llm/calls.py), and the
job writes the log with record_calls.
Its statements are LongTermQueries'. May import: errors, settings, llm/, tokens, this package's queries. Imported by
summarize/, consolidation/, and recall at round start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from langchain_core.messages import BaseMessage

from memory_agent.errors import InvalidInputError
from memory_agent.llm.calls import PURPOSES, CallLog, LLMCall, Purpose
from memory_agent.long_term.queries import QUERIES as Q
from memory_agent.settings import ModelPrice
from memory_agent.tokens import count_tokens

logger = logging.getLogger("memory_agent.ledger")

PER_TOKENS = Decimal(1_000_000)


def price(call: LLMCall, prices: Mapping[str, ModelPrice]) -> tuple[Decimal, bool]:
    """The call's cost from the price table, and whether the table names its model (unnamed: 0)."""
    entry = prices.get(call.model)
    if entry is None:
        return Decimal(0), False
    cost = (
        Decimal(call.input_tokens) * Decimal(str(entry.input))
        + Decimal(call.output_tokens) * Decimal(str(entry.output))
    ) / PER_TOKENS
    return cost, True


def call_params(
    tenant_id: str, user_id: str, calls: Sequence[LLMCall], *, now: datetime, prices: Mapping[str, ModelPrice]
) -> dict[str, Any]:
    """The parameters of record_llm_calls for `calls` of one user, priced; InvalidInputError on a naive `now` or
    an unknown purpose."""
    if now.tzinfo is None:
        raise InvalidInputError(f"now must be a timezone-aware datetime, got {now!r}")
    unknown = {c.purpose for c in calls} - set(PURPOSES)
    if unknown:
        raise InvalidInputError(f"unknown LLM call purposes {sorted(unknown)}; use one of {list(PURPOSES)}")
    rows, total = [], Decimal(0)
    for call in calls:
        cost, known = price(call, prices)
        total += cost
        rows.append(
            {
                "purpose": call.purpose,
                "model": call.model,
                "input_tokens": max(0, call.input_tokens),
                "output_tokens": max(0, call.output_tokens),
                "cost": str(cost),  # exact: numeric reads the text
                "priced": known,
            }
        )
    # `calls` is one JSON parameter (record_llm_calls' p_calls); `cost` is the calls' total, for the caller.
    return {"tenant_id": tenant_id, "user_id": user_id, "now": now, "calls": json.dumps(rows), "cost": total}


async def record_calls(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    user_id: str,
    calls: Sequence[LLMCall],
    *,
    now: datetime,
    prices: Mapping[str, ModelPrice],
    reservation: Reservation | None = None,
) -> Decimal:
    """Write the calls of one user (one statement: the rows and the tenant's monthly total, and the end of the
    `reservation` they settle); their cost."""
    if not calls and (reservation is None or reservation.reservation_id is None):
        return Decimal(0)
    params = call_params(tenant_id, user_id, calls, now=now, prices=prices)
    if reservation is not None and reservation.reservation_id is not None:
        await Q.settle_budget(conn, {**params, "reservation_id": reservation.reservation_id})
    else:
        await Q.record_llm_calls(conn, params)
    return params["cost"]


async def record_log(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    user_id: str,
    log: CallLog,
    *,
    now: datetime,
    prices: Mapping[str, ModelPrice],
    reservation: Reservation | None = None,
) -> None:
    """record_calls for a job's log; a failure is logged, never raised (the job's work is done already; the
    reservation then counts until it expires), and leaves the caller's transaction, if any, usable (a savepoint)."""
    try:
        async with conn.transaction():
            await record_calls(conn, tenant_id, user_id, log.calls, now=now, prices=prices, reservation=reservation)
    except Exception as exc:
        logger.warning("LLM calls of %s/%s not recorded in the ledger: %s", tenant_id, user_id, exc)


# A reservation its process never settled (killed during the call) stops counting after this long.
RESERVATION_TTL = timedelta(minutes=15)


@dataclass(frozen=True)
class Reservation:
    """A model call's estimated cost held against its tenant's monthly ceiling until the call is recorded
    (record_calls settles it) or released; `reservation_id` None: no ceiling, nothing held."""

    tenant_id: str
    reservation_id: int | None
    amount: Decimal


def estimate_cost(
    purpose: Purpose, model: str, prompt: Sequence[BaseMessage], prices: Mapping[str, ModelPrice]
) -> Decimal:
    """What a call is expected to cost before it is made: its prompt's tokens, and as many again for the answer
    (a summary is shorter than what it condenses)."""
    tokens = count_tokens(list(prompt))
    return price(LLMCall(purpose, model, tokens, tokens), prices)[0]


async def reserve(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: str,
    ceiling: Decimal | float | None,
    amount: Decimal,
    now: datetime,
) -> Reservation | None:
    """Reserve `amount` of the tenant's month before a model call, or None when the month (spent plus the calls
    in flight) reached `ceiling`: the database decides (reserve_budget, sql/definitions), so concurrent callers
    of any path and process cannot all pass one check. Run it on a connection outside a transaction: the
    tenant's month row stays locked until the transaction ends."""
    if ceiling is None:
        return Reservation(tenant_id, None, amount)
    row = await Q.reserve_budget(
        conn,
        {
            "tenant_id": tenant_id,
            "now": now,
            "ceiling": str(Decimal(str(ceiling))),
            "amount": str(amount),
            "ttl": RESERVATION_TTL,
        },
    )
    if row is None or row["reservation_id"] is None:
        return None
    return Reservation(tenant_id, row["reservation_id"], amount)


async def release(conn: psycopg.AsyncConnection[Any], reservation: Reservation) -> None:
    """Give a reservation back (its call failed and cost nothing known); a failure is logged, and the
    reservation counts until it expires."""
    if reservation.reservation_id is None:
        return
    try:
        await Q.release_budget(conn, {"tenant_id": reservation.tenant_id, "reservation_id": reservation.reservation_id})
    except Exception as exc:
        logger.warning(
            "Cost reservation %s of %s not released: %s", reservation.reservation_id, reservation.tenant_id, exc
        )


async def tenant_spend(conn: psycopg.AsyncConnection[Any], tenant_id: str, now: datetime) -> Decimal:
    """What memory_agent's calls cost the tenant in the calendar month (UTC) of `now`."""
    row = await Q.tenant_month_spend(conn, tenant_id, now)
    return Decimal(row["cost"]) if row else Decimal(0)


@dataclass(frozen=True)
class Budget:
    """A tenant's month against its ceiling: over when the spend reached it."""

    tenant_id: str
    spent: Decimal
    ceiling: Decimal | None

    @property
    def over(self) -> bool:
        return self.ceiling is not None and self.spent >= self.ceiling

    def describe(self) -> str:
        return f"tenant {self.tenant_id!r} spent {self.spent:.4f} of its monthly cost ceiling {self.ceiling}"


async def tenant_budget(
    conn: psycopg.AsyncConnection[Any], tenant_id: str, ceiling: Decimal | float | None, now: datetime
) -> Budget:
    """The tenant's budget at `now`; no ceiling (None) reads nothing."""
    if ceiling is None:
        return Budget(tenant_id, Decimal(0), None)
    return Budget(tenant_id, await tenant_spend(conn, tenant_id, now), Decimal(str(ceiling)))
