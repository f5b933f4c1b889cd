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
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_user_id text;
BEGIN
    -- PL/pgSQL, not SQL: Citus plans a parameterized statement of a SQL function over a distributed table for no
    -- table (the owner read is one routed statement here); on PostgreSQL neither form is inlined (SET clause).
    SELECT o.user_id INTO v_user_id FROM conversation_owners AS o WHERE o.conversation_id = p_conversation_id;
    RETURN COALESCE(v_user_id, 'conversation:' || p_conversation_id);
END
$$;

-- "Record a user's model calls": their rows in llm_calls and their cost added to the user's month in
-- tenant_monthly_spend (memory_agent's own calls only, not 'app'; the tenant's month is the sum of its rows, 0023).
-- The ledger's statement (record_llm_calls) and a summary's completion (complete_memory's transaction, so the version
-- and its calls commit together) apply it. `now` is the caller's clock; months are UTC. `p_calls`: a JSON array of
-- {purpose, model, input_tokens, output_tokens, cost, priced} (one parameter: six arrays cost the client 30 µs to
-- encode, this 5). Both writes name the user: on Citus they run on the user's shard, where the summary writes.
-- It runs as the owner of the schema (SECURITY DEFINER): a role bound by row-level security may only read the
-- ledger (grant_bound_role), so the spend it records only ever grows; the tenant is the one its transaction names
-- (check_named_tenant).
CREATE FUNCTION record_llm_calls(p_tenant_id text, p_user_id text, p_now timestamptz, p_calls jsonb)
RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
    v_call record;
    v_recorded integer := 0;
    v_cost numeric := 0;
    v_calls bigint := 0;
BEGIN
    PERFORM check_named_tenant(p_tenant_id);
    -- One routed INSERT per call (on Citus an INSERT ... SELECT goes through the coordinator and commits in two
    -- phases); a summary makes one or two calls.
    FOR v_call IN
        SELECT * FROM jsonb_to_recordset(p_calls)
            AS c (purpose text, model text, input_tokens integer, output_tokens integer, cost numeric, priced boolean)
    LOOP
        INSERT INTO llm_calls
            (user_id, tenant_id, purpose, model, input_tokens, output_tokens, cost, priced, created_at)
        VALUES (p_user_id, p_tenant_id, v_call.purpose, v_call.model, v_call.input_tokens, v_call.output_tokens,
                v_call.cost, v_call.priced, p_now);
        v_recorded := v_recorded + 1;
        IF v_call.purpose <> 'app' THEN
            v_cost := v_cost + v_call.cost;
            v_calls := v_calls + 1;
        END IF;
    END LOOP;
    IF v_calls > 0 THEN
        INSERT INTO tenant_monthly_spend AS s (user_id, tenant_id, month, cost, calls)
        VALUES (p_user_id, p_tenant_id, date_trunc('month', p_now AT TIME ZONE 'UTC')::date, v_cost, v_calls)
        ON CONFLICT (user_id, tenant_id, month) DO UPDATE
        SET cost = s.cost + EXCLUDED.cost, calls = s.calls + EXCLUDED.calls;
    END IF;
    RETURN v_recorded;
END
$$;

-- "Record the app model's calls of a round": one 'app' row per answer of the round (sequences `p_first_sequence` to
-- `p_last_sequence`) that reports its usage, priced from `p_prices` as the ledger prices (per million tokens), the
-- model from the answer (else `p_app_model`, else 'unknown'); not counted toward the tenant's month. Read first,
-- then written row by row through record_llm_calls: on Citus an INSERT ... SELECT writes the shard through COPY,
-- which a role bound by row-level security may not use.
CREATE FUNCTION record_app_calls(
    p_tenant_id text, p_user_id text, p_conversation_id text, p_first_sequence integer, p_last_sequence integer,
    p_app_model text, p_prices jsonb, p_now timestamptz
)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_calls jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_object(
               'purpose', 'app', 'model', a.model, 'input_tokens', a.input_tokens, 'output_tokens', a.output_tokens,
               'cost', (a.input_tokens * COALESCE((p.price ->> 'input')::numeric, 0)
                        + a.output_tokens * COALESCE((p.price ->> 'output')::numeric, 0)) / 1000000,
               'priced', p.price IS NOT NULL))
    INTO v_calls
    FROM (
        SELECT COALESCE(NULLIF(m.message #>> '{data,response_metadata,model_name}', ''),
                        NULLIF(m.message #>> '{data,response_metadata,model}', ''),
                        p_app_model, 'unknown') AS model,
               -- A count as the ledger records it: a JSON number from 0 to 100 million (rounded), else 0. The
               -- answer's usage is untrusted input: cast as it came, a count past the integer range, a fraction or
               -- a string failed the round that stored it. A CASE, not AND: a string is never cast.
               CASE WHEN jsonb_typeof(m.message #> '{data,usage_metadata,input_tokens}') <> 'number' THEN 0
                    WHEN (m.message #>> '{data,usage_metadata,input_tokens}')::numeric BETWEEN 0 AND 100000000
                    THEN round((m.message #>> '{data,usage_metadata,input_tokens}')::numeric)::integer
                    ELSE 0 END AS input_tokens,
               CASE WHEN jsonb_typeof(m.message #> '{data,usage_metadata,output_tokens}') <> 'number' THEN 0
                    WHEN (m.message #>> '{data,usage_metadata,output_tokens}')::numeric BETWEEN 0 AND 100000000
                    THEN round((m.message #>> '{data,usage_metadata,output_tokens}')::numeric)::integer
                    ELSE 0 END AS output_tokens
        FROM messages AS m
        WHERE m.user_id = p_user_id AND m.conversation_id = p_conversation_id
          AND m.sequence_number BETWEEN p_first_sequence AND p_last_sequence
          AND m.role = 'assistant' AND jsonb_typeof(m.message #> '{data,usage_metadata}') = 'object'
    ) AS a
    CROSS JOIN LATERAL (SELECT p_prices -> a.model AS price) AS p;
    IF v_calls IS NULL THEN
        RETURN 0;
    END IF;
    RETURN record_llm_calls(p_tenant_id, p_user_id, p_now, v_calls);
END
$$;

-- A round start is two steps, in this order (begin_round, below, runs both; each is also a named query of its own).
-- take_round_lease: when the conversation's recorded owner is the caller's (tenant, user), take its lease unless
-- another round holds a live one. One row: the owner (null when the thread has none yet: the caller claims it with
-- claim_conversation, a statement of its own, and tries again) and `holder`, null when the lease was refused or the
-- conversation belongs to someone else. The owner claim is not made here: on Citus the owners are keyed by thread
-- id and the lease by user, and writing both in one transaction would commit on two nodes (two-phase commit) at
-- every first round; reading the owner does not. The lease's clock is the database's (every process of the
-- deployment compares against it), taken once (`v_now`: on Citus a parameter of the upsert).
CREATE FUNCTION take_round_lease(
    p_conversation_id text, p_tenant_id text, p_user_id text, p_holder text, p_lease_s float8
)
RETURNS TABLE (owner_tenant_id text, owner_user_id text, holder text)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := now();
    v_owner_tenant_id text;
    v_owner_user_id text;
    v_holder text;
BEGIN
    SELECT o.tenant_id, o.user_id INTO v_owner_tenant_id, v_owner_user_id
    FROM conversation_owners AS o WHERE o.conversation_id = p_conversation_id;
    IF v_owner_tenant_id = p_tenant_id AND v_owner_user_id = p_user_id THEN
        INSERT INTO round_leases AS l (tenant_id, user_id, conversation_id, holder, acquired_at, expires_at)
        VALUES (p_tenant_id, p_user_id, p_conversation_id, p_holder, v_now, v_now + make_interval(secs => p_lease_s))
        ON CONFLICT (user_id, conversation_id) DO UPDATE
            SET holder = EXCLUDED.holder, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at
            WHERE l.expires_at < EXCLUDED.acquired_at OR l.holder = EXCLUDED.holder
        RETURNING l.holder INTO v_holder;
    END IF;
    RETURN QUERY SELECT v_owner_tenant_id, v_owner_user_id, v_holder;
END
$$;

-- round_context:
-- Round start, one statement: the latest completed memory, the messages after it (all messages when none) but at
-- most the last `max_gap` of the conversation, and which of the graph state's message ids are stored already.
-- `from_sequence` is where the read started; `cut_round` the round of the message just before it (a round cut in
-- two by the bound is dropped whole by the caller); `conversation_created_at` the conversation row's created_at (null:
-- nothing stored yet): the round end gives it back to end_round, which stores nothing in a conversation erased since.
-- PL/pgSQL (Citus does not plan a SQL function's parameterized statement over distributed tables) without a SET
-- clause: the caller's search_path is the schema's (the pool's connections, begin_round).
CREATE FUNCTION round_context(p_user_id text, p_conversation_id text, p_message_ids text[], p_max_gap integer)
RETURNS TABLE (memory_id integer, memory_text text, start_sequence integer, end_sequence integer,
               sequence_number integer, round_number integer, message jsonb, stored_ids text[],
               from_sequence integer, cut_round integer, conversation_created_at timestamptz)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH latest AS (
        SELECT memory_id, memory_text, start_sequence, end_sequence
        FROM latest_memory
        WHERE user_id = p_user_id AND conversation_id = p_conversation_id
        LIMIT 1
    ), conversation AS (
        SELECT next_sequence, created_at FROM conversations
        WHERE user_id = p_user_id AND conversation_id = p_conversation_id
    ), bound AS (
        -- While summaries fail or lag the gap grows with every round: bounded here, read through the primary key.
        SELECT GREATEST(
            COALESCE((SELECT end_sequence FROM latest), -1) + 1,
            COALESCE((SELECT next_sequence FROM conversation), 0) - p_max_gap
        ) AS from_sequence
    )
    SELECT latest.memory_id, latest.memory_text, latest.start_sequence, latest.end_sequence,
           m.sequence_number, m.round_number, m.message, known.stored_ids, bound.from_sequence, m.cut_round,
           (SELECT created_at FROM conversation)
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
    -- The range is closed above by next_sequence (every stored message is below it, in the same snapshot): a
    -- range open above is estimated at a third of the conversation, and while one conversation was most of
    -- the table (a new deployment) the generic plan read every message of the table instead (a sequential scan,
    -- ~0.9 ms a round start at 2,000 messages, growing with the table). Closed, it is estimated as the narrow
    -- range it is.
    LEFT JOIN LATERAL (
        SELECT read.sequence_number, read.round_number, read.message, read.cut_round
        FROM (
            SELECT sequence_number, round_number, message,
                   max(round_number) FILTER (WHERE sequence_number = (SELECT from_sequence FROM bound) - 1)
                       OVER () AS cut_round
            FROM messages
            WHERE user_id = p_user_id AND conversation_id = p_conversation_id
              AND sequence_number >= (SELECT from_sequence FROM bound) - 1
              AND sequence_number < (SELECT next_sequence FROM conversation)
            ORDER BY sequence_number
        ) AS read
        WHERE read.sequence_number >= (SELECT from_sequence FROM bound)
    ) AS m ON true
    ORDER BY m.sequence_number;
END
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
               message jsonb, stored_ids text[], from_sequence integer, cut_round integer,
               conversation_created_at timestamptz)
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
            NULL::integer, NULL::timestamptz;
        RETURN;
    END IF;
    RETURN QUERY SELECT taken.owner_tenant_id, taken.owner_user_id, taken.holder, c.*
                 FROM round_context(p_user_id, p_conversation_id, p_message_ids, p_max_gap) AS c;
END
$$;

-- release_round_lease: the lease given back by its holder (round end, failure, cancellation, interrupt).
CREATE FUNCTION release_round_lease(p_user_id text, p_conversation_id text, p_holder text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    DELETE FROM round_leases AS l
    WHERE l.user_id = p_user_id AND l.conversation_id = p_conversation_id AND l.holder = p_holder;
END
$$;

-- claim_summary: claim the conversation's single in-flight slot (the partial unique index on `processing` rows
-- decides between racing rounds) for the summary of start_sequence-end_sequence: one row, the new row's memory_id,
-- null when another process holds the slot. The trigger rule's claim (claim_summary, a named query) and the round
-- end (end_round, before the metrics row) apply it. `p_picked_up`: the claimer also picks
-- the row up (as start_memory does: started now, first attempt), because its process runs the summary right after
-- commit (the inline executor), and the row carries what start_memory would read for it: the base memory's text and
-- end, and the messages to summarize (incremental: after the base memory, never before the window start), oldest
-- first; a queued job's row is picked up by start_memory instead. Statements of their own, each naming the user: on
-- Citus each runs on the user's shard.
CREATE FUNCTION claim_summary(
    p_tenant_id text, p_user_id text, p_conversation_id text, p_start_sequence integer, p_end_sequence integer,
    p_base_memory_id integer, p_picked_up boolean DEFAULT false
)
RETURNS TABLE (memory_id integer, base_memory_text text, base_end_sequence integer, picked_sequences integer[],
               picked_messages jsonb[])
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_id integer;
    v_base_text text;
    v_base_end integer;
    v_sequences integer[];
    v_messages jsonb[];
BEGIN
    INSERT INTO memory (tenant_id, user_id, conversation_id, memory_text, start_sequence, end_sequence,
                        base_memory_id, status, started_at, attempts)
    VALUES (p_tenant_id, p_user_id, p_conversation_id, '', p_start_sequence, p_end_sequence, p_base_memory_id,
            'processing', CASE WHEN p_picked_up THEN now() END, CASE WHEN p_picked_up THEN 1 ELSE 0 END)
    ON CONFLICT (user_id, conversation_id) WHERE status = 'processing' DO NOTHING
    RETURNING memory.memory_id INTO v_id;
    IF v_id IS NOT NULL AND p_picked_up THEN
        SELECT b.memory_text, b.end_sequence INTO v_base_text, v_base_end
        FROM memory AS b WHERE b.user_id = p_user_id AND b.memory_id = p_base_memory_id;
        SELECT array_agg(m.sequence_number ORDER BY m.sequence_number), array_agg(m.message ORDER BY m.sequence_number)
        INTO v_sequences, v_messages
        FROM messages AS m
        WHERE m.user_id = p_user_id AND m.conversation_id = p_conversation_id
          AND m.sequence_number BETWEEN GREATEST(p_start_sequence, COALESCE(v_base_end + 1, 0)) AND p_end_sequence;
    END IF;
    RETURN QUERY SELECT v_id, v_base_text, v_base_end, v_sequences, v_messages;
END
$$;

-- trigger_state:
-- The trigger rule's state (its decision is memory_agent/conversation/window.py's summary_due): the in-flight row,
-- the latest completed memory and the round starts inside the window that ends at `p_last_sequence` and is
-- `p_window` messages long.
-- PL/pgSQL without a SET clause, as round_context.
CREATE FUNCTION trigger_state(p_user_id text, p_conversation_id text, p_last_sequence integer, p_window integer)
RETURNS TABLE (processing_memory_id integer, processing_age_s float8, base_memory_id integer,
               base_end_sequence integer, round_starts integer[])
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
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
           -- Closed above at the window's end (a start after it is no start of the window): open above, the range
           -- was estimated at a third of the conversation, and the generic plan end_round keeps read every
           -- message of the table while one conversation was most of it (~0.9 ms a round end at 2,000 messages).
           ARRAY(
               SELECT w.sequence_number
               FROM (
                   SELECT sequence_number, round_number,
                          lag(round_number) OVER (ORDER BY sequence_number) AS previous_round
                   FROM messages
                   WHERE user_id = p_user_id AND conversation_id = p_conversation_id
                     AND sequence_number >= (SELECT from_sequence FROM bound) - 1
                     AND sequence_number <= p_last_sequence
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
    ) AS b ON true;
END
$$;

-- due_summary: the trigger rule on trigger_state's reading, the design's meaning as memory_agent/conversation/window.py
-- states it (summary_due, then calculate_summary_range with the round starts; tests hold the two to the same answers):
-- `outcome` null when a summary is due, with the window to claim (`start_sequence`-`p_last_sequence`), else why
-- not: below_threshold, already_processing (a `processing` row quiet for at most `p_timeout_s`), no_new_messages
-- (fewer than `p_min_new` messages after the latest completed memory's end). The window starts at the first round
-- that begins inside the last `p_window` messages, else at the last round that begins before them (a round is never
-- split); without round starts, at the next even sequence (user/assistant pairs). Scalar arguments, no table read.
CREATE FUNCTION due_summary(
    p_last_sequence integer, p_summarize_after integer, p_min_new integer, p_processing_age_s float8,
    p_timeout_s float8, p_base_end_sequence integer, p_window integer, p_round_starts integer[]
)
RETURNS TABLE (outcome text, start_sequence integer)
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_start integer := GREATEST(0, p_last_sequence - p_window + 1);
BEGIN
    IF p_last_sequence < p_summarize_after THEN
        RETURN QUERY SELECT 'below_threshold'::text, NULL::integer;
    ELSIF p_processing_age_s IS NOT NULL AND NOT p_processing_age_s > p_timeout_s THEN
        RETURN QUERY SELECT 'already_processing'::text, NULL::integer;
    ELSIF p_base_end_sequence IS NOT NULL AND p_last_sequence - p_base_end_sequence < p_min_new THEN
        RETURN QUERY SELECT 'no_new_messages'::text, NULL::integer;
    ELSIF p_round_starts IS NULL OR cardinality(p_round_starts) = 0 THEN
        RETURN QUERY SELECT NULL::text, v_start + v_start % 2;
    ELSE
        RETURN QUERY
        SELECT NULL::text,
               COALESCE(min(s) FILTER (WHERE s BETWEEN v_start AND p_last_sequence),
                        max(s) FILTER (WHERE s <= p_last_sequence))
        FROM unnest(p_round_starts) AS s;
    END IF;
END
$$;

-- end_round: a round end in one call: store the round's messages that are not stored yet (same id and same content)
-- with sequence numbers allocated under the conversation row lock, give the lease back (when `p_holder` holds it),
-- apply the trigger rule (trigger_state over the window that ends at the round's last message, decided by
-- due_summary with `p_summarize_after`, `p_min_new` and `p_timeout_s`): a stale `processing` row is reclaimed, a due
-- summary is claimed (claim_summary, picked up too with `p_pick_up`), and write the round's metrics row
-- (`p_metrics`: its columns as a JSON object; null: none) with the round's sequences and the rule's outcome. One
-- row: the round (nothing new: `stored` 0, nothing else written), the outcome (`trigger_outcome`: 'started' with
-- `triggered_memory_id` and the claimed window, or why not; a claim another process won is 'already_processing'),
-- the reclaimed row's id, what claim_summary read for a picked-up row, and the `processing` row the rule found in
-- flight (`in_flight_memory_id`). Run alone in autocommit it is the round's transaction: a round end is one round
-- trip.
-- `p_round`: the round's messages in order, a JSON array of {role, content, message, after} (one parameter: three
-- text arrays of message JSON cost the client ~115 µs to encode, escaping every quote; this ~4 µs); `after`, the
-- last sequence stored when the round started (-1: none), is absent for a round stored without its start. `p_now`: the
-- service's clock (the conversation's updated_at, the messages' created_at). `p_started_on`: the created_at of the
-- conversation row the round started on (round_context's conversation_created_at; null: nothing was stored, or no
-- round start is known).
-- Forgetting wins the race against a round in flight: when that row is gone or is another one since
-- (delete_conversation or forget_user erased it, and maybe a later round made it anew), nothing is stored and
-- `erased` is true. The test is the conversation row's update (its lock), so an erasure either committed before it
-- or waits for the round's commit and erases the round too. A round that only outlived its lease (another round
-- took it over) finds its row and stores. A new row's created_at is the wall clock at its insert (clock_timestamp()):
-- a row made again after an erasure is never taken for the erased one.
-- Plain statements, each naming the user (no modifying CTE): on Citus each one is routed to the user's shard, and
-- the round's writes commit on one node.
-- One generic plan per connection for its statements, as begin_round: the store was planned at every round end
-- (0.38 of its 1.0 ms, measured), and no plan here depends on the parameters (every read goes through a key given
-- in full, the round's messages are one JSON value).
CREATE FUNCTION end_round(
    p_tenant_id text, p_user_id text, p_conversation_id text, p_holder text, p_round jsonb, p_window integer,
    p_now timestamptz, p_started_on timestamptz, p_metrics jsonb, p_summarize_after integer, p_min_new integer,
    p_timeout_s float8, p_pick_up boolean
)
RETURNS TABLE (first_sequence integer, last_sequence integer, round_number integer, stored integer,
               stored_positions integer[], trigger_outcome text, triggered_memory_id integer,
               summary_start_sequence integer, base_memory_id integer, reclaimed_memory_id integer,
               base_memory_text text, base_end_sequence integer, picked_sequences integer[],
               picked_messages jsonb[], in_flight_memory_id integer, erased boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_fresh jsonb;
    v_count integer;
    v_next integer;
    v_round integer;
    v_item jsonb;
    v_position bigint;
    v_erased boolean := false;
    v_processing_id integer;
    v_processing_age_s float8;
    v_base_id integer;
    v_base_end integer;
    v_round_starts integer[];
    v_outcome text := 'below_threshold';
    v_start integer;
    v_reclaimed integer;
    v_claimed_id integer;
    v_claimed_base_text text;
    v_claimed_base_end integer;
    v_picked_sequences integer[];
    v_picked_messages jsonb[];
    r round_metrics;
BEGIN
    SELECT jsonb_agg(r.item || jsonb_build_object('ord', r.ord) ORDER BY r.ord), count(*)
    INTO v_fresh, v_count
    FROM jsonb_array_elements(p_round) WITH ORDINALITY AS r (item, ord)
    WHERE r.item -> 'message' -> 'data' ->> 'id' IS NULL
       OR CASE WHEN r.item ? 'after'
       -- A round that started on this conversation ("after": the last sequence stored at its start) looks for a
       -- copy among the messages stored since: its start found its input unstored up to there (round_context's
       -- stored_ids), and what the graph produced is new even when an earlier message has its id and content (a
       -- model that repeats itself). Read through the primary key's range, a few rows at most (none unless
       -- another round stored meanwhile). Ordered by the key: without statistics (a new table, before the first
       -- ANALYZE) the planner's estimates of the three indexes that lead with (user_id, conversation_id) tie,
       -- and unordered it took the round index and read every message of the conversation for each message of
       -- the round (2 x 0.3 ms at 800 messages, growing with the conversation).
               THEN NOT EXISTS (SELECT 1 FROM messages AS s
                                WHERE s.user_id = p_user_id AND s.conversation_id = p_conversation_id
                                  AND s.sequence_number > (r.item ->> 'after')::integer
                                  AND s.message_id = r.item -> 'message' -> 'data' ->> 'id'
                                  AND s.message = r.item -> 'message'
                                ORDER BY s.sequence_number
                                OFFSET 0)
       -- A round stored without its start (no "after"): one probe of the partial message_id index per message
       -- over the whole conversation. OFFSET 0 keeps the probe a correlated subplan: otherwise the planner, with
       -- statistics stale after fast growth (a conversation estimated at one row), turned it into one hashed read
       -- of every message of the conversation through the round index (2,000 messages: 583 buffers, 4 ms at
       -- every round end, growing with the conversation). `message_id IS NOT NULL` written out lets the planner
       -- use the partial index.
               ELSE NOT EXISTS (SELECT 1 FROM messages AS s
                                WHERE s.user_id = p_user_id AND s.conversation_id = p_conversation_id
                                  AND s.message_id IS NOT NULL
                                  AND s.message_id = r.item -> 'message' -> 'data' ->> 'id'
                                  AND s.message = r.item -> 'message'
                                OFFSET 0)
          END;
    IF v_count > 0 AND p_started_on IS NOT NULL THEN
        UPDATE conversations AS c
        SET next_sequence = c.next_sequence + v_count, round_count = c.round_count + 1, updated_at = p_now
        WHERE c.user_id = p_user_id AND c.conversation_id = p_conversation_id AND c.created_at = p_started_on
        RETURNING c.next_sequence, c.round_count INTO v_next, v_round;
        IF NOT FOUND THEN
            v_erased := true;
            v_count := 0;
        END IF;
    ELSIF v_count > 0 THEN
        INSERT INTO conversations AS c
            (tenant_id, user_id, conversation_id, next_sequence, round_count, created_at, updated_at)
        VALUES (p_tenant_id, p_user_id, p_conversation_id, v_count, 1, clock_timestamp(), p_now)
        ON CONFLICT (user_id, conversation_id) DO UPDATE
            SET next_sequence = c.next_sequence + EXCLUDED.next_sequence,
                round_count = c.round_count + 1,
                updated_at = EXCLUDED.updated_at
        RETURNING c.next_sequence, c.round_count INTO v_next, v_round;
    END IF;
    IF v_count > 0 THEN
        -- One routed INSERT per message (on Citus an INSERT ... SELECT goes through the coordinator and commits in
        -- two phases); on PostgreSQL the loop costs what the set insert did for a round's few messages.
        FOR v_item, v_position IN
            SELECT f.item, f.position FROM jsonb_array_elements(v_fresh) WITH ORDINALITY AS f (item, position)
        LOOP
            -- Dated by the service's clock, as an imported message by its own time: recall's date spans and
            -- `as_of` read the same clock.
            INSERT INTO messages (tenant_id, user_id, conversation_id, sequence_number, round_number, role, content,
                                  message, created_at)
            VALUES (p_tenant_id, p_user_id, p_conversation_id, v_next - v_count + v_position::integer - 1, v_round,
                    v_item ->> 'role', v_item ->> 'content', v_item -> 'message', p_now);
        END LOOP;
    END IF;
    -- The lease after the conversation row (locked by the upsert above), the order an erasure takes them in
    -- (lock_user_conversations, then erase_conversation_rows): given back first, a round end waited for an
    -- erasure's conversation row while holding the lease that erasure waited for (deadlocks with 4 round loops
    -- and 15 deletes on one thread).
    IF p_holder IS NOT NULL THEN
        PERFORM release_round_lease(p_user_id, p_conversation_id, p_holder);
    END IF;
    IF v_count = 0 THEN
        RETURN QUERY SELECT NULL::integer, NULL::integer, NULL::integer, 0, NULL::integer[], NULL::text,
            NULL::integer, NULL::integer, NULL::integer, NULL::integer, NULL::text, NULL::integer, NULL::integer[],
            NULL::jsonb[], NULL::integer, v_erased;
        RETURN;
    END IF;
    -- The trigger rule, after the round's messages (its window ends at the round's last one).
    IF v_next - 1 >= p_summarize_after THEN
        SELECT t.processing_memory_id, t.processing_age_s, t.base_memory_id, t.base_end_sequence, t.round_starts
        INTO v_processing_id, v_processing_age_s, v_base_id, v_base_end, v_round_starts
        FROM trigger_state(p_user_id, p_conversation_id, v_next - 1, p_window) AS t;
        SELECT d.outcome, d.start_sequence INTO v_outcome, v_start
        FROM due_summary(v_next - 1, p_summarize_after, p_min_new, v_processing_age_s, p_timeout_s, v_base_end,
                         p_window, v_round_starts || (v_next - v_count)) AS d;
    END IF;
    IF v_processing_id IS NOT NULL AND v_outcome IS DISTINCT FROM 'already_processing' THEN
        -- Stale (quiet past the timeout): failed before anything else, as the reclaimer fails it (reclaim_stale);
        -- the conversation holds one `processing` row at most (the partial unique index).
        UPDATE memory AS m
        SET status = 'failed',
            finished_at = now(),
            error = format('reclaimed: processing for %s s without finishing (timeout %s s); the summarizer that '
                           'owned it stopped or hung',
                           round(EXTRACT(EPOCH FROM now() - COALESCE(m.started_at, m.created_at)))::int,
                           p_timeout_s::int)
        WHERE m.user_id = p_user_id AND m.conversation_id = p_conversation_id AND m.status = 'processing'
          AND memory_is_stuck(m.status, m.started_at, m.created_at, make_interval(secs => p_timeout_s), now())
        RETURNING m.memory_id INTO v_reclaimed;
    END IF;
    IF v_outcome IS NULL THEN
        -- The claim is the database's: another process that claimed the slot since trigger_state read wins it.
        SELECT c.memory_id, c.base_memory_text, c.base_end_sequence, c.picked_sequences, c.picked_messages
        INTO v_claimed_id, v_claimed_base_text, v_claimed_base_end, v_picked_sequences, v_picked_messages
        FROM claim_summary(p_tenant_id, p_user_id, p_conversation_id, v_start, v_next - 1, v_base_id,
                           p_pick_up) AS c;
        v_outcome := CASE WHEN v_claimed_id IS NULL THEN 'already_processing' ELSE 'started' END;
    END IF;
    IF p_metrics IS NOT NULL THEN
        r := jsonb_populate_record(NULL::round_metrics, p_metrics);
        r.round_number := v_round;
        r.first_sequence := v_next - v_count;
        r.last_sequence := v_next - 1;
        r.summary_triggered := v_outcome = 'started';
        r.trigger_outcome := v_outcome;
        r.triggered_memory_id := v_claimed_id;
        -- The client measured up to sending this statement; the round is persisted once it has run.
        r.latency_round_ms := r.latency_round_ms + EXTRACT(EPOCH FROM clock_timestamp() - statement_timestamp()) * 1000;
        PERFORM store_round_metrics(p_tenant_id, p_user_id, p_conversation_id, r);
    END IF;
    RETURN QUERY SELECT v_next - v_count, v_next - 1, v_round, v_count,
                        ARRAY(SELECT (e ->> 'ord')::integer FROM jsonb_array_elements(v_fresh) AS e), v_outcome,
                        v_claimed_id, v_start, v_base_id, v_reclaimed, v_claimed_base_text, v_claimed_base_end,
                        v_picked_sequences, v_picked_messages,
                        CASE WHEN v_outcome = 'already_processing' AND v_reclaimed IS NULL THEN v_processing_id END,
                        false;
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
