-- Named queries of the cost ledger (memory_agent/ledger.py) and the tenant guards
-- (memory_agent/consolidation/guards.py). `now` is the caller's clock, never now(); months are UTC.

-- record_llm_calls --
-- A user's model calls, and their cost added to the tenant's month (the function record_llm_calls, sql/definitions).
SELECT record_llm_calls(%(tenant_id)s, %(user_id)s, %(now)s, %(calls)s::jsonb) AS recorded;

-- settle_budget --
-- record_llm_calls for the calls of a reservation, and the reservation's end, in one statement (settle_budget,
-- sql/definitions).
SELECT settle_budget(%(tenant_id)s, %(user_id)s, %(now)s, %(calls)s::jsonb, %(reservation_id)s) AS recorded;

-- reserve_budget --
-- Hold a model call's estimated cost against the tenant's monthly ceiling (reserve_budget, sql/definitions): the
-- reservation, null when the month, spent plus the calls in flight, reached the ceiling.
SELECT reservation_id, spent, reserved
FROM reserve_budget(%(tenant_id)s, %(now)s::timestamptz, %(ceiling)s::numeric, %(amount)s::numeric, %(ttl)s::interval);

-- release_budget --
-- A reservation given back: its call failed.
DELETE FROM budget_reservations
WHERE user_id = '' AND tenant_id = %(tenant_id)s AND reservation_id = %(reservation_id)s;

-- tenant_month_spend --
-- What memory_agent's calls cost a tenant in the calendar month (UTC) of `now`: 0 when nothing was recorded.
-- The sum of the tenant's rows: one per user and the tenant's own (0023).
SELECT COALESCE(sum(cost), 0) AS cost FROM tenant_monthly_spend
WHERE tenant_id = %(tenant_id)s AND month = date_trunc('month', %(now)s::timestamptz AT TIME ZONE 'UTC')::date;

-- list_llm_calls --
-- A tenant's recorded calls (one user's when named), oldest first.
SELECT user_id, tenant_id, purpose, model, input_tokens, output_tokens, cost, priced, created_at
FROM llm_calls
WHERE tenant_id = %(tenant_id)s AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s)
ORDER BY created_at, call_id;

-- claim_scheduler_run --
-- The tenant's run at `now`, unless its previous run is after `cutoff` (`now` less the cooldown, computed by the
-- caller: on Citus the conflict clause may hold no time arithmetic): a row when this run may go on.
INSERT INTO tenant_scheduler_runs AS r (user_id, tenant_id, last_run)
VALUES ('', %(tenant_id)s, %(now)s)
ON CONFLICT (user_id, tenant_id) DO UPDATE
SET last_run = EXCLUDED.last_run
WHERE r.last_run <= %(cutoff)s::timestamptz
RETURNING last_run;

-- scheduler_last_run --
-- When the tenant's scheduler last ran (what a run in its cooldown reports).
SELECT last_run FROM tenant_scheduler_runs WHERE user_id = '' AND tenant_id = %(tenant_id)s;

-- try_tenant_slot --
-- Take slot `slot` of the tenant's concurrent-job slots for this session (held until tenant_slot_release or
-- the connection ends: a killed worker frees its slot).
SELECT pg_try_advisory_lock(hashtextextended(
    concat_ws(chr(31), 'memory_agent.tenant_job_slot', %(tenant_id)s::text, %(slot)s::text), 0)) AS taken;

-- release_tenant_slot --
-- Give back slot `slot` of the tenant taken by this session.
SELECT pg_advisory_unlock(hashtextextended(
    concat_ws(chr(31), 'memory_agent.tenant_job_slot', %(tenant_id)s::text, %(slot)s::text), 0)) AS released;

-- upgrade_report --
-- The weekly upgrade report (view upgrade_report_weekly), newest weeks first; one tenant when named.
SELECT *
FROM upgrade_report_weekly
WHERE (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND week_start >= %(since)s::date
ORDER BY week_start DESC, tenant_id;

-- record_app_calls --
-- Round end: the app model's answers of the round that report their usage, priced from `prices` (as the ledger;
-- record_app_calls, sql/definitions).
SELECT record_app_calls(%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(first_sequence)s, %(last_sequence)s,
                        %(app_model)s, %(prices)s::jsonb, %(now)s) AS recorded;
