-- Rules of row-level security and of the monthly cost ceiling, defined once (re-created with every definitions
-- file when one of them changes: memory_agent/db/migrate.py).

-- "Name the transaction's tenant": row-level security filters the rest of the transaction by `p_tenant_id` ('': no
-- row at all). A SET LOCAL statement, not set_config(): on Citus, where the policies are checked again on the
-- shards, only a SET LOCAL statement run with citus.propagate_set_commands = 'local' travels to the workers (with
-- the BEGIN of every worker connection the transaction opens later; nothing for the ones it opens before a
-- savepoint is released, hence: name the tenant first). citus.select_opens_transaction_block keeps a read's worker
-- connections in the transaction, where the setting is. No SET clause on the function: it would undo the SET
-- LOCAL on return. On a server without Citus the two citus settings are not defined and are left alone.
CREATE FUNCTION name_transaction_tenant(p_tenant_id text)
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF current_setting('citus.propagate_set_commands', true) IS NOT NULL THEN
        PERFORM set_config('citus.propagate_set_commands', 'local', true);
        PERFORM set_config('citus.select_opens_transaction_block', 'on', true);
    END IF;
    EXECUTE format('SET LOCAL memory_agent.tenant_id = %L', p_tenant_id);
END
$$;

-- "The tenant a function running as the owner acts for": the functions that write what a role bound by row-level
-- security may only read (the cost ledger) take their tenant as a parameter and bypass the policies; they act only
-- for the tenant the transaction (or session) names, as the policies would. The owner's processes, and work of no
-- tenant, name none ('' or unset): any tenant then. Bound code names its tenant on every connection
-- (docs/concepts/privacy.md).
CREATE FUNCTION is_named_tenant(p_tenant_id text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT COALESCE(current_setting('memory_agent.tenant_id', true), '') IN ('', p_tenant_id)
$$;

-- A write of another tenant's ledger than the one named is refused, as the policies refuse other writes.
CREATE FUNCTION check_named_tenant(p_tenant_id text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF NOT is_named_tenant(p_tenant_id) THEN
        RAISE EXCEPTION 'the transaction names tenant %, not %: write the cost ledger of the tenant it names',
            quote_literal(current_setting('memory_agent.tenant_id', true)), quote_literal(p_tenant_id)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;

-- "The tenant of a key": the one read made before any tenant is named (an HTTP request's credentials). It runs as
-- the owner of the schema (SECURITY DEFINER) so that a role bound by row-level security can resolve a key, and
-- answers that one question: a key hash in, its tenant out (no row: unknown or revoked). Every other read or
-- write of api_keys is its tenant's own (the policy of 0017).
CREATE FUNCTION api_key_tenant(p_key_hash bytea)
RETURNS TABLE (tenant_id text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
    SELECT k.tenant_id FROM api_keys AS k WHERE k.key_hash = p_key_hash AND k.revoked_at IS NULL
$$;

-- "Reserve a model call's cost": the call may start while the tenant's month, spent plus its live reservations,
-- is below `p_ceiling`; it then reserves `p_amount` (its estimated cost) until `p_now + p_ttl`. Decided under the
-- lock of the tenant's month row in tenant_monthly_spend (user_id ''), so concurrent callers (any process, any path) are
-- admitted one at a time, each seeing the reservations of those before it: the ceiling is overrun by at most the
-- last admitted call's error of estimate. Returns the reservation (null: refused) and what the decision read.
-- Runs in the caller's transaction: call it in a transaction of its own (autocommit), the lock is held until its
-- end. As the owner (SECURITY DEFINER): a role bound by row-level security may not lock or write the spend rows
-- itself (grant_bound_role); the tenant is the one its transaction names (check_named_tenant).
CREATE FUNCTION reserve_budget(
    p_tenant_id text, p_now timestamptz, p_ceiling numeric, p_amount numeric, p_ttl interval
)
RETURNS TABLE (reservation_id bigint, spent numeric, reserved numeric)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_month date := date_trunc('month', p_now AT TIME ZONE 'UTC')::date;
    v_spent numeric;
    v_reserved numeric;
    v_id bigint;
BEGIN
    PERFORM check_named_tenant(p_tenant_id);
    INSERT INTO tenant_monthly_spend (user_id, tenant_id, month)
    VALUES ('', p_tenant_id, v_month)
    ON CONFLICT (user_id, tenant_id, month) DO NOTHING;
    PERFORM 1
    FROM tenant_monthly_spend AS s
    WHERE s.user_id = '' AND s.tenant_id = p_tenant_id AND s.month = v_month
    FOR UPDATE;
    -- The month is the sum of the tenant's rows (one per user, and the tenant's own: 0023), read after the lock.
    SELECT COALESCE(sum(s.cost), 0) INTO v_spent
    FROM tenant_monthly_spend AS s
    WHERE s.tenant_id = p_tenant_id AND s.month = v_month;
    -- Reservations never settled (their process died) stop counting at expiry; they are deleted here, under the lock.
    DELETE FROM budget_reservations AS r
    WHERE r.user_id = '' AND r.tenant_id = p_tenant_id AND r.expires_at <= p_now;
    -- A statement of its own after the lock: it sees every reservation committed before the lock was granted.
    SELECT COALESCE(sum(r.amount), 0) INTO v_reserved
    FROM budget_reservations AS r
    WHERE r.user_id = '' AND r.tenant_id = p_tenant_id AND r.month = v_month AND r.expires_at > p_now;
    IF v_spent + v_reserved < p_ceiling THEN
        INSERT INTO budget_reservations AS r (tenant_id, month, amount, expires_at)
        VALUES (p_tenant_id, v_month, p_amount, p_now + p_ttl)
        RETURNING r.reservation_id INTO v_id;
    END IF;
    RETURN QUERY SELECT v_id, v_spent, v_reserved;
END
$$;

-- "Settle a reservation": the calls it was made for are recorded (record_llm_calls) and the reservation ends, in one
-- call: their actual cost replaces the estimate held for them, with no moment where neither counts. A function, not
-- a statement that joins the DELETE to the call: Citus sends such a statement whole to the worker of the
-- reservation's shard, and the calls' rows are then written from there, through connections that carry none of the
-- transaction's settings (row-level security's tenant among them).
CREATE FUNCTION settle_budget(
    p_tenant_id text, p_user_id text, p_now timestamptz, p_calls jsonb, p_reservation_id bigint
)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    DELETE FROM budget_reservations
    WHERE user_id = '' AND tenant_id = p_tenant_id AND reservation_id = p_reservation_id;
    RETURN record_llm_calls(p_tenant_id, p_user_id, p_now, p_calls);
END
$$;

-- "Pseudonymise a forgotten user's ledger": their llm_calls rows move to user '' (the tenant's rows of no user) and
-- their monthly spend rows are added to the tenant's own (user ''): the tenant's spend and call counts stay whole,
-- nothing names the user. Returns the calls moved. Rows of user '' live on the shard of '', so on Citus this writes a
-- second shard (a two-phase commit when it is on another node than the user's; nothing to move: none). The rows are
-- read off the user's shard, then written by multi-row INSERT ... VALUES statements of literals (up to 100 rows
-- each, all on the shard of '': one routed statement each; a routed INSERT per row took 0.75 ms a row), never by an
-- INSERT ... SELECT, which Citus runs through the coordinator and writes with COPY (refused to a role bound by
-- row-level security). As the owner (SECURITY DEFINER): a role bound by row-level security may not delete ledger rows
-- (grant_bound_role: deleting the spend rows would reset a cost ceiling), and this moves them without changing a
-- total; for another tenant than the one the transaction names it moves nothing, as the policies would find nothing.
CREATE FUNCTION pseudonymise_user_ledger(p_tenant_id text, p_user_id text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
    v_calls jsonb;
    v_months jsonb;
    v_values text;
    v_row record;
BEGIN
    IF p_user_id = '' OR NOT is_named_tenant(p_tenant_id) THEN
        RETURN 0;  -- the tenant's own rows; or another tenant's, which a bound role's forget finds nothing of
    END IF;
    WITH gone AS (
        DELETE FROM llm_calls WHERE user_id = p_user_id AND tenant_id = p_tenant_id
        RETURNING purpose, model, input_tokens, output_tokens, cost, priced, created_at
    )
    SELECT jsonb_agg(to_jsonb(gone)) INTO v_calls FROM gone;
    FOR v_values IN
        SELECT string_agg(format('(%L, %L, %L, %L, %L, %L, %L, %L, %L)', '', p_tenant_id, c.purpose, c.model,
                                 c.input_tokens, c.output_tokens, c.cost, c.priced, c.created_at), ', ')
        FROM (SELECT r.*, (row_number() OVER () - 1) / 100 AS chunk
              FROM jsonb_to_recordset(COALESCE(v_calls, '[]'))
                  AS r (purpose text, model text, input_tokens integer, output_tokens integer, cost numeric,
                        priced boolean, created_at timestamptz)) AS c
        GROUP BY c.chunk
    LOOP
        EXECUTE 'INSERT INTO llm_calls (user_id, tenant_id, purpose, model, input_tokens, output_tokens, cost, '
                'priced, created_at) VALUES ' || v_values;
    END LOOP;

    WITH gone AS (
        DELETE FROM tenant_monthly_spend WHERE user_id = p_user_id AND tenant_id = p_tenant_id
        RETURNING month, cost, calls
    )
    SELECT jsonb_agg(to_jsonb(gone)) INTO v_months FROM gone;
    FOR v_row IN
        SELECT * FROM jsonb_to_recordset(COALESCE(v_months, '[]')) AS m (month date, cost numeric, calls bigint)
    LOOP
        INSERT INTO tenant_monthly_spend AS s (user_id, tenant_id, month, cost, calls)
        VALUES ('', p_tenant_id, v_row.month, v_row.cost, v_row.calls)
        ON CONFLICT (user_id, tenant_id, month) DO UPDATE
        SET cost = s.cost + EXCLUDED.cost, calls = s.calls + EXCLUDED.calls;
    END LOOP;
    RETURN COALESCE(jsonb_array_length(v_calls), 0);
END
$$;

-- "Release an erased thread": the owner row of `p_conversation_id` goes when it names this (tenant, user) and the user
-- has neither a conversation nor a lease of that id. The erasure deleted both: one there now belongs to a round that
-- began after it committed (stored, or still running), and the thread stays theirs. Run after the erasure committed,
-- in a transaction of its own: the owner rows are keyed by thread id, on Citus on another shard than the user's
-- rows, and one transaction writing both would commit in two phases (the two reads here do not). Safe to run again
-- (a retry after a failure between the two: nothing of the user is left to read by then). True when the row went.
CREATE FUNCTION release_thread(p_tenant_id text, p_user_id text, p_conversation_id text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM 1 FROM conversations AS c
    WHERE c.user_id = p_user_id AND c.tenant_id = p_tenant_id AND c.conversation_id = p_conversation_id;
    IF FOUND THEN
        RETURN false;
    END IF;
    PERFORM 1 FROM round_leases AS l WHERE l.user_id = p_user_id AND l.conversation_id = p_conversation_id;
    IF FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM conversation_owners AS o
    WHERE o.conversation_id = p_conversation_id AND o.tenant_id = p_tenant_id AND o.user_id = p_user_id;
    RETURN FOUND;
END
$$;
