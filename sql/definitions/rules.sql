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
CREATE VIEW latest_memory WITH (security_invoker = true) AS
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
-- so the version and its calls commit together) apply it. `now` is the caller's clock; months are UTC. `p_calls`: a
-- JSON array of {purpose, model, input_tokens, output_tokens, cost, priced} (one parameter: six arrays cost the
-- client 30 µs to encode, this 5).
CREATE FUNCTION record_llm_calls(p_tenant_id text, p_user_id text, p_now timestamptz, p_calls jsonb)
RETURNS integer
LANGUAGE sql VOLATILE
SET search_path FROM CURRENT
AS $$
    WITH calls AS (
        INSERT INTO llm_calls
            (user_id, tenant_id, purpose, model, input_tokens, output_tokens, cost, priced, created_at)
        SELECT p_user_id, p_tenant_id, c.purpose, c.model, c.input_tokens, c.output_tokens, c.cost, c.priced, p_now
        FROM jsonb_to_recordset(p_calls)
            AS c (purpose text, model text, input_tokens integer, output_tokens integer, cost numeric, priced boolean)
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

-- A round start is two steps, in this order (begin_round, below, runs both; each is also a named query of its own).
-- take_round_lease: claim the conversation for its (tenant, user) and, when they own it, take its lease unless
-- another round holds a live one. One row: the owner (null when a concurrent first claim is not visible yet: re-read with conversation_owner)
-- and `holder`, null when the lease was refused or the conversation belongs to someone else.
CREATE FUNCTION take_round_lease(
    p_conversation_id text, p_tenant_id text, p_user_id text, p_holder text, p_lease_s float8
)
RETURNS TABLE (owner_tenant_id text, owner_user_id text, holder text)
LANGUAGE sql VOLATILE
SET search_path FROM CURRENT
AS $$
    WITH claimed AS (
        INSERT INTO conversation_owners (conversation_id, tenant_id, user_id)
        VALUES (p_conversation_id, p_tenant_id, p_user_id)
        ON CONFLICT (conversation_id) DO NOTHING
        RETURNING tenant_id, user_id
    ), owner AS (
        SELECT tenant_id, user_id FROM claimed
        UNION ALL
        SELECT tenant_id, user_id FROM conversation_owners WHERE conversation_id = p_conversation_id
        LIMIT 1
    ), lease AS (
        INSERT INTO round_leases AS l (tenant_id, user_id, conversation_id, holder, expires_at)
        SELECT owner.tenant_id, owner.user_id, p_conversation_id, p_holder, now() + make_interval(secs => p_lease_s)
        FROM owner
        WHERE owner.tenant_id = p_tenant_id AND owner.user_id = p_user_id
        ON CONFLICT (user_id, conversation_id) DO UPDATE
            SET holder = EXCLUDED.holder, acquired_at = now(), expires_at = EXCLUDED.expires_at
            WHERE l.expires_at < now() OR l.holder = EXCLUDED.holder
        RETURNING holder
    )
    SELECT owner.tenant_id AS owner_tenant_id, owner.user_id AS owner_user_id, (SELECT holder FROM lease) AS holder
    FROM (SELECT 1) AS one
    LEFT JOIN owner ON true
$$;

-- round_context:
-- Round start, one statement: the latest completed memory, the messages after it (all messages when none) but at
-- most the last `max_gap` of the conversation, and which of the graph state's message ids are stored already.
-- `from_sequence` is where the read started; `cut_round` the round of the message just before it (a round cut in
-- two by the bound is dropped whole by the caller).
-- No SET clause (it would keep the planner from inlining the function into its caller's statement): the caller's
-- search_path is the schema's (the pool's connections, begin_round).
CREATE FUNCTION round_context(p_user_id text, p_conversation_id text, p_message_ids text[], p_max_gap integer)
RETURNS TABLE (memory_id integer, memory_text text, start_sequence integer, end_sequence integer,
               sequence_number integer, round_number integer, message jsonb, stored_ids text[],
               from_sequence integer, cut_round integer)
LANGUAGE sql STABLE
AS $$
    WITH latest AS (
        SELECT memory_id, memory_text, start_sequence, end_sequence
        FROM latest_memory
        WHERE user_id = p_user_id AND conversation_id = p_conversation_id
        LIMIT 1
    ), bound AS (
        -- While summaries fail or lag the gap grows with every round: bounded here, read through the primary key.
        SELECT GREATEST(
            COALESCE((SELECT end_sequence FROM latest), -1) + 1,
            COALESCE((SELECT next_sequence FROM conversations
                      WHERE user_id = p_user_id AND conversation_id = p_conversation_id), 0)
                - p_max_gap
        ) AS from_sequence
    )
    SELECT latest.memory_id, latest.memory_text, latest.start_sequence, latest.end_sequence,
           m.sequence_number, m.round_number, m.message, known.stored_ids, bound.from_sequence, m.cut_round
    FROM (SELECT 1) AS one
    LEFT JOIN latest ON true
    CROSS JOIN bound
    CROSS JOIN LATERAL (
        -- One probe of the partial message_id index per id, kept a correlated subplan (OFFSET 0) as in save_round:
        -- read as one `= ANY` scan, stale statistics sent it through the round index (every message, 2 ms at 2,000).
        SELECT ARRAY(
            SELECT DISTINCT given.id FROM unnest(p_message_ids::text[]) AS given (id)
            WHERE EXISTS (SELECT 1 FROM messages AS s
                          WHERE s.user_id = p_user_id AND s.conversation_id = p_conversation_id
                            AND s.message_id IS NOT NULL AND s.message_id = given.id
                          OFFSET 0)
        ) AS stored_ids
    ) AS known
    -- The gap must be read through the primary key (user_id, conversation_id, sequence_number) with the bound as an
    -- index condition. Joined directly, with stale statistics (a conversation that grew since ANALYZE) the
    -- planner took the (conversation_id, round_number) index and filtered: every message of the conversation
    -- read at every round start, 3-5 ms at 10,000 messages. The ordered subquery makes the primary key the
    -- cheaper path, and the scalar bound keeps it an index condition in generic plans too. Every index now starts
    -- with (user_id, conversation_id): the extended statistics of 0006 (conversation_id determines user_id) keep
    -- the planner from estimating a conversation at under one row, which made all of them look alike.
    -- The message just before the bound is read in the same primary-key range (one sequence earlier) for its round
    -- (`cut_round`), then left out: looked up on its own, stale statistics sent it to the round index, which
    -- filtered every message of the conversation.
    LEFT JOIN LATERAL (
        SELECT read.sequence_number, read.round_number, read.message, read.cut_round
        FROM (
            SELECT sequence_number, round_number, message,
                   max(round_number) FILTER (WHERE sequence_number = (SELECT from_sequence FROM bound) - 1)
                       OVER () AS cut_round
            FROM messages
            WHERE user_id = p_user_id AND conversation_id = p_conversation_id
              AND sequence_number >= (SELECT from_sequence FROM bound) - 1
            ORDER BY sequence_number
        ) AS read
        WHERE read.sequence_number >= (SELECT from_sequence FROM bound)
    ) AS m ON true
    ORDER BY m.sequence_number
$$;

-- begin_round: the round start in one statement: the lease, then (a statement of its own, so it sees every round
-- that gave the lease back) memory + gap. One row with the lease's columns and null context when the lease was
-- refused or the owner is not (yet) the caller; else round_context's rows, each with the lease's columns. Its
-- statements keep one generic plan per connection: round_context was planned at every round start (0.44 of its
-- 0.74 ms, measured), and its plan does not depend on the parameters (the bound is a scalar, every read goes
-- through a key given in full).
CREATE FUNCTION begin_round(
    p_conversation_id text, p_tenant_id text, p_user_id text, p_holder text, p_lease_s float8,
    p_message_ids text[], p_max_gap integer
)
RETURNS TABLE (owner_tenant_id text, owner_user_id text, holder text, memory_id integer, memory_text text,
               start_sequence integer, end_sequence integer, sequence_number integer, round_number integer,
               message jsonb, stored_ids text[], from_sequence integer, cut_round integer)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    taken record;
BEGIN
    SELECT * INTO taken FROM take_round_lease(p_conversation_id, p_tenant_id, p_user_id, p_holder, p_lease_s);
    IF taken.holder IS NULL OR taken.owner_user_id IS NULL THEN
        RETURN QUERY SELECT taken.owner_tenant_id, taken.owner_user_id, taken.holder, NULL::integer, NULL::text,
            NULL::integer, NULL::integer, NULL::integer, NULL::integer, NULL::jsonb, NULL::text[], NULL::integer,
            NULL::integer;
        RETURN;
    END IF;
    RETURN QUERY SELECT taken.owner_tenant_id, taken.owner_user_id, taken.holder, c.*
                 FROM round_context(p_user_id, p_conversation_id, p_message_ids, p_max_gap) AS c;
END
$$;

-- release_round_lease: the lease given back by its holder (round end, failure, cancellation, interrupt).
CREATE FUNCTION release_round_lease(p_user_id text, p_conversation_id text, p_holder text)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path FROM CURRENT
AS $$
    DELETE FROM round_leases
    WHERE user_id = p_user_id AND conversation_id = p_conversation_id AND holder = p_holder
$$;

-- claim_summary: claim the conversation's single in-flight slot (the partial unique index on `processing` rows
-- decides between racing rounds) for the summary of start_sequence-end_sequence: the new row's memory_id, null when
-- another process holds the slot. The trigger rule's claim (claim_summary, a named query) and the round end's
-- metrics statement (insert_round_metrics, which claims and records in one statement) apply it. `p_picked_up`: the
-- claimer also picks the row up (as start_memory does: started now, first attempt), because its process runs the
-- summary right after commit (the inline executor); a queued job's row is picked up by start_memory instead.
CREATE FUNCTION claim_summary(
    p_tenant_id text, p_user_id text, p_conversation_id text, p_start_sequence integer, p_end_sequence integer,
    p_base_memory_id integer, p_picked_up boolean DEFAULT false
)
RETURNS integer
LANGUAGE sql VOLATILE
SET search_path FROM CURRENT
AS $$
    INSERT INTO memory (tenant_id, user_id, conversation_id, memory_text, start_sequence, end_sequence,
                        base_memory_id, status, started_at, attempts)
    VALUES (p_tenant_id, p_user_id, p_conversation_id, '', p_start_sequence, p_end_sequence, p_base_memory_id,
            'processing', CASE WHEN p_picked_up THEN now() END, CASE WHEN p_picked_up THEN 1 ELSE 0 END)
    ON CONFLICT (user_id, conversation_id) WHERE status = 'processing' DO NOTHING
    RETURNING memory_id
$$;

-- trigger_state:
-- The trigger rule's state (its decision is memory_agent/conversation/window.py's summary_due): the in-flight row,
-- the latest completed memory and the round starts inside the window that ends at `p_last_sequence` and is
-- `p_window` messages long.
-- No SET clause (inlined into its callers' statements, as round_context).
CREATE FUNCTION trigger_state(p_user_id text, p_conversation_id text, p_last_sequence integer, p_window integer)
RETURNS TABLE (processing_memory_id integer, processing_age_s float8, base_memory_id integer,
               base_end_sequence integer, round_starts integer[])
LANGUAGE sql STABLE
AS $$
    WITH bound AS (
        SELECT GREATEST(0, p_last_sequence - p_window + 1) AS from_sequence
    )
    SELECT p.memory_id,
           EXTRACT(EPOCH FROM now() - COALESCE(p.started_at, p.created_at))::float8,
           b.memory_id,
           b.end_sequence,
           -- A round starts where the round number changes (a round's messages have consecutive sequences): read
           -- from one sequence earlier through the primary key, in its order. Looked up by round number instead,
           -- stale statistics sent both lookups through the round index (every message of the conversation).
           ARRAY(
               SELECT w.sequence_number
               FROM (
                   SELECT sequence_number, round_number,
                          lag(round_number) OVER (ORDER BY sequence_number) AS previous_round
                   FROM messages
                   WHERE user_id = p_user_id AND conversation_id = p_conversation_id
                     AND sequence_number >= (SELECT from_sequence FROM bound) - 1
               ) AS w
               WHERE w.sequence_number >= (SELECT from_sequence FROM bound)
                 AND w.round_number IS DISTINCT FROM w.previous_round
               ORDER BY 1
           )
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (
        SELECT memory_id, created_at, started_at FROM memory
        WHERE user_id = p_user_id AND conversation_id = p_conversation_id AND status = 'processing'
    ) AS p ON true
    LEFT JOIN LATERAL (
        SELECT memory_id, end_sequence FROM latest_memory
        WHERE user_id = p_user_id AND conversation_id = p_conversation_id
        LIMIT 1
    ) AS b ON true
$$;

-- end_round: the round end's statements before the trigger rule decides, in one: give the lease back (when
-- `p_holder` holds it), store the round's messages that are not stored yet (same id and same content) with sequence
-- numbers allocated under the conversation row lock, then (a statement of its own, so it sees them) trigger_state
-- over the window that ends at the round's last message. One row; nothing new: `stored` 0 and null state.
-- `p_round`: the round's messages in order, a JSON array of {role, content, message} (one parameter: three text
-- arrays of message JSON cost the client ~115 µs to encode, escaping every quote; this ~4 µs).
-- One generic plan per connection for its statements, as begin_round: the store was planned at every round end
-- (0.38 of its 1.0 ms, measured), and no plan here depends on the parameters (every read goes through a key given
-- in full, the round's messages are one JSON value).
CREATE FUNCTION end_round(
    p_tenant_id text, p_user_id text, p_conversation_id text, p_holder text, p_round jsonb, p_window integer
)
RETURNS TABLE (first_sequence integer, last_sequence integer, round_number integer, stored integer,
               stored_positions integer[], processing_memory_id integer, processing_age_s float8,
               base_memory_id integer, base_end_sequence integer, round_starts integer[])
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    saved record;
BEGIN
    IF p_holder IS NOT NULL THEN
        PERFORM release_round_lease(p_user_id, p_conversation_id, p_holder);
    END IF;
    WITH candidate AS (
        SELECT m.role, m.content, m.message, m.ord
        FROM jsonb_array_elements(p_round) WITH ORDINALITY AS r (item, ord),
             LATERAL (SELECT r.item ->> 'role', r.item ->> 'content', r.item -> 'message', r.ord)
                 AS m (role, content, message, ord)
        WHERE m.message -> 'data' ->> 'id' IS NULL
           -- One probe of the partial message_id index per message of the round. OFFSET 0 keeps the probe a
           -- correlated subplan: otherwise the planner, with statistics stale after fast growth (a conversation
           -- estimated at one row), turned it into one hashed read of every message of the conversation through
           -- the round index (2,000 messages: 583 buffers, 4 ms at every round end, growing with the
           -- conversation). `message_id IS NOT NULL` written out lets the planner use the partial index.
           OR NOT EXISTS (SELECT 1 FROM messages AS s
                          WHERE s.user_id = p_user_id AND s.conversation_id = p_conversation_id
                            AND s.message_id IS NOT NULL
                            AND s.message_id = m.message -> 'data' ->> 'id' AND s.message = m.message
                            -- What the graph produced ("after": the last sequence stored at round start) is new
                            -- even when an earlier message has its id and content (a model that repeats itself).
                            AND s.sequence_number > coalesce((r.item ->> 'after')::integer, -1)
                          OFFSET 0)
    ), fresh AS (
        SELECT c.role, c.content, c.message, c.ord, row_number() OVER (ORDER BY c.ord)::int AS position
        FROM candidate AS c
    ), conv AS (
        INSERT INTO conversations AS c (tenant_id, user_id, conversation_id, next_sequence, round_count)
        SELECT p_tenant_id, p_user_id, p_conversation_id, count(*), 1 FROM fresh HAVING count(*) > 0
        ON CONFLICT (user_id, conversation_id) DO UPDATE
            SET next_sequence = c.next_sequence + EXCLUDED.next_sequence,
                round_count = c.round_count + 1,
                updated_at = now()
        RETURNING c.next_sequence - (SELECT count(*) FROM fresh)::int AS first_sequence,
                  c.next_sequence - 1 AS last_sequence, c.round_count AS round_number
    ), inserted AS (
        INSERT INTO messages (tenant_id, user_id, conversation_id, sequence_number, round_number, role, content,
                              message)
        SELECT p_tenant_id, p_user_id, p_conversation_id, conv.first_sequence + fresh.position - 1,
               conv.round_number, fresh.role, fresh.content, fresh.message
        FROM conv, fresh
        RETURNING sequence_number
    )
    SELECT conv.first_sequence, conv.last_sequence, conv.round_number,
           (SELECT count(*) FROM inserted)::int AS stored,
           (SELECT array_agg(fresh.ord::int ORDER BY fresh.ord) FROM fresh) AS stored_positions
    INTO saved
    FROM (SELECT 1) AS one
    LEFT JOIN conv ON true;
    IF saved.stored = 0 THEN
        RETURN QUERY SELECT NULL::integer, NULL::integer, NULL::integer, 0, NULL::integer[], NULL::integer,
            NULL::float8, NULL::integer, NULL::integer, NULL::integer[];
        RETURN;
    END IF;
    RETURN QUERY SELECT saved.first_sequence, saved.last_sequence, saved.round_number, saved.stored,
                        saved.stored_positions, t.*
                 FROM trigger_state(p_user_id, p_conversation_id, saved.last_sequence, p_window) AS t;
END
$$;

-- analyze_young_tables: ANALYZE each table of the round path that has grown past twice its analyzed size plus
-- `p_min_changes` rows (never analyzed: once it holds that many), below `p_max_rows` rows; the analyzed names.
-- Growth, not changes: `conversations` and `memory` are updated at every round and summary without growing.
-- Why: every pooled connection keeps one plan per statement of begin_round/end_round (and PostgreSQL's own
-- foreign-key checks) until the tables' statistics change. Plans made while a table was nearly empty read every
-- message or memory version of the user through whichever index led with user_id (measured in the steady
-- benchmark on a new database: ~1.1 ms of a round, growing with the conversation) until autovacuum analyzes the
-- table, which waits for its naptime (1 min) and 10 % growth. Large tables are autovacuum's.
-- One process at a time (the others skip this turn), tables it may analyze only (owner or the owner's member),
-- none that another ANALYZE or VACUUM holds (SKIP_LOCKED), and no waiting on locks.
CREATE FUNCTION analyze_young_tables(p_min_changes bigint, p_max_rows bigint)
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET lock_timeout = '1s'
AS $$
DECLARE
    young record;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('memory_agent.analyze_young_tables')) THEN
        RETURN;
    END IF;
    FOR young IN
        SELECT s.relid, s.relname
        FROM pg_stat_user_tables AS s
        JOIN pg_class AS c ON c.oid = s.relid
        WHERE s.relid IN ('conversations'::regclass, 'messages'::regclass, 'memory'::regclass,
                          'round_metrics'::regclass)
          AND pg_has_role(c.relowner, 'USAGE')
          AND c.reltuples < p_max_rows
          AND s.n_live_tup >= 2 * greatest(c.reltuples, 0) + p_min_changes
        ORDER BY s.relname
    LOOP
        EXECUTE format('ANALYZE (SKIP_LOCKED) %s', young.relid::regclass);
        RETURN NEXT young.relname;
    END LOOP;
END
$$;
