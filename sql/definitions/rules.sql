-- Rules that more than one statement applies, defined once. Re-created with every definitions file when one
-- of them changes (see memory_agent/db/migrate.py); never copied into a numbered migration.

-- "Stuck processing": a `processing` row whose summarizer went quiet (no pick-up since it was created or
-- last started) for longer than `timeout` at time `at`. The reclaimer (processing_timeout_s), the
-- stuck_processing_after() listing and memory_health's `stuck` count all apply this function.
-- Scalar arguments and no table read: the planner inlines it, so a caller's indexes still apply.
CREATE FUNCTION memory_is_stuck(
    status text, started_at timestamptz, created_at timestamptz, timeout interval, at timestamptz
)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT status = 'processing' AND COALESCE(started_at, created_at) < at - timeout
$$;

-- "The latest completed memory of a conversation": the memory a round is given, the base of the next
-- summary. Filter on user_id and conversation_id: both are DISTINCT ON columns, so the filter is pushed
-- into the view and read as the first entry of idx_memory_conversation_status.
CREATE VIEW latest_memory AS
SELECT DISTINCT ON (m.user_id, m.conversation_id) m.*
FROM memory AS m
WHERE m.status = 'completed'
ORDER BY m.user_id, m.conversation_id, m.end_sequence DESC, m.memory_id DESC;

-- "The user a thread id belongs to": its owner as recorded, else the per-conversation scope. Readers that
-- take a thread id alone (the observability queries, context_at_round, message_visibility) filter on
-- (conversation_user(id), id), so they read through keys that lead with user_id instead of scanning.
CREATE FUNCTION conversation_user(p_conversation_id text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $$
    SELECT COALESCE(
        (SELECT o.user_id FROM conversation_owners AS o WHERE o.conversation_id = p_conversation_id),
        'conversation:' || p_conversation_id
    )
$$;

-- "Record a user's model calls": their rows in llm_calls and their cost added to the tenant's month (memory_agent's
-- own calls only, not 'app'). The ledger's statement (record_llm_calls) and a summary's completion (complete_memory,
-- so the version and its calls commit together) apply it. `now` is the caller's clock; months are UTC.
CREATE FUNCTION record_llm_calls(
    p_tenant_id text, p_user_id text, p_now timestamptz, p_purposes text[], p_models text[],
    p_input_tokens integer[], p_output_tokens integer[], p_costs numeric[], p_priced boolean[]
)
RETURNS integer
LANGUAGE sql VOLATILE
SET search_path FROM CURRENT
AS $$
    WITH calls AS (
        INSERT INTO llm_calls
            (user_id, tenant_id, purpose, model, input_tokens, output_tokens, cost, priced, created_at)
        SELECT p_user_id, p_tenant_id, c.purpose, c.model, c.input_tokens, c.output_tokens, c.cost, c.priced, p_now
        FROM unnest(p_purposes, p_models, p_input_tokens, p_output_tokens, p_costs, p_priced)
            AS c (purpose, model, input_tokens, output_tokens, cost, priced)
        RETURNING purpose, cost
    ), month AS (
        INSERT INTO tenant_monthly_spend AS s (user_id, tenant_id, month, cost, calls)
        SELECT '', p_tenant_id, date_trunc('month', p_now AT TIME ZONE 'UTC')::date, sum(cost), count(*)
        FROM calls
        WHERE purpose <> 'app'
        HAVING count(*) > 0
        ON CONFLICT (user_id, tenant_id, month) DO UPDATE
        SET cost = s.cost + EXCLUDED.cost, calls = s.calls + EXCLUDED.calls
    )
    SELECT count(*)::integer FROM calls
$$;
