-- Named queries. Each block starts with `-- name --` and a one-line description.
-- Every statement runs with search_path set to the memory_agent schema.
-- Every statement on conversations, messages, memory, round_metrics and round_leases names user_id (the
-- distribution column) and joins on it; only the sweep (reclaim_stale without a conversation) reads all users.

-- load_context --
-- Memory + gap (round_context, sql/definitions): the latest completed memory, the messages after it but at most the
-- last `max_gap` of the conversation, and which of the given message ids are stored already.
SELECT * FROM round_context(%(user_id)s, %(conversation_id)s, %(message_ids)s::text[], %(max_gap)s::integer);

-- session_settings --
-- At connection open: the timeout after which the views count a quiet `processing` row as stuck (processing_timeout()).
SELECT set_config('memory_agent.processing_timeout_s', %(processing_timeout_s)s, false);

-- round_plan_settings --
-- For the statements of a round end only (sent first in its transaction's pipeline): one generic plan per connection.
-- save_round was planned at every round end (0.38 of its 1.0 ms, measured); its plan does not depend on the
-- parameters (every read goes through a key given in full, the round's messages are arrays), so one plan serves
-- every round. (The round start's function, begin_round, sets the same for its own statements.)
SELECT set_config('plan_cache_mode', 'force_generic_plan', true);

-- acquire_round_lease --
-- Claim the conversation for its (tenant, user) and take its lease (take_round_lease, sql/definitions): one row, the
-- owner (null while a concurrent first claim is not visible yet) and `holder` (null: refused or not theirs).
SELECT * FROM take_round_lease(%(conversation_id)s, %(tenant_id)s, %(user_id)s, %(holder)s, %(lease_s)s::float8);

-- begin_round --
-- The round start in one statement (begin_round, sql/definitions): the lease, then memory + gap.
SELECT * FROM begin_round(%(conversation_id)s, %(tenant_id)s, %(user_id)s, %(holder)s, %(lease_s)s::float8,
                          %(message_ids)s::text[], %(max_gap)s::integer);

-- conversation_owner --
-- The (tenant, user) a conversation id belongs to (no row for a thread no round has named yet).
SELECT tenant_id, user_id FROM conversation_owners WHERE conversation_id = %(conversation_id)s;

-- release_round_lease --
-- Round end (in its transaction), failure, cancellation or interrupt: give the conversation's lease back.
DELETE FROM round_leases
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s AND holder = %(holder)s;

-- gap_cap_cause --
-- Why a round's gap hit the bound: the newest memory row of the conversation and how many rounds no memory covers.
SELECT newest.status AS latest_status, newest.error AS latest_error,
       c.round_count - COALESCE((SELECT e.round_number FROM messages AS e
                                 WHERE e.user_id = c.user_id AND e.conversation_id = c.conversation_id
                                   AND e.sequence_number = %(memory_end_sequence)s), 0) AS rounds_behind
FROM conversations AS c
LEFT JOIN LATERAL (
    SELECT status, error FROM memory
    WHERE memory.user_id = c.user_id AND memory.conversation_id = c.conversation_id
    ORDER BY memory_id DESC
    LIMIT 1
) AS newest ON true
WHERE c.user_id = %(user_id)s AND c.conversation_id = %(conversation_id)s;

-- save_round --
-- Round end: store the round's messages that are not stored yet (same id and same content), with sequence numbers
-- allocated under the conversation row lock. Nothing new: no row is written and `stored` is 0.
WITH candidate AS (
    SELECT m.role, m.content, m.message, m.ord
    FROM unnest(%(roles)s::text[], %(contents)s::text[], %(messages)s::text[]::jsonb[])
             WITH ORDINALITY AS m (role, content, message, ord)
    WHERE m.message -> 'data' ->> 'id' IS NULL
       -- One probe of the partial message_id index per message of the round. OFFSET 0 keeps the probe a
       -- correlated subplan: otherwise the planner, with statistics stale after fast growth (a conversation
       -- estimated at one row), turned it into one hashed read of every message of the conversation through
       -- the round index (2,000 messages: 583 buffers, 4 ms at every round end, growing with the conversation).
       -- `message_id IS NOT NULL` written out lets the planner use the partial index.
       OR NOT EXISTS (SELECT 1 FROM messages AS s
                      WHERE s.user_id = %(user_id)s AND s.conversation_id = %(conversation_id)s
                        AND s.message_id IS NOT NULL
                        AND s.message_id = m.message -> 'data' ->> 'id' AND s.message = m.message
                      OFFSET 0)
), fresh AS (
    SELECT role, content, message, ord, row_number() OVER (ORDER BY ord)::int AS position FROM candidate
), conv AS (
    INSERT INTO conversations AS c (tenant_id, user_id, conversation_id, next_sequence, round_count)
    SELECT %(tenant_id)s, %(user_id)s, %(conversation_id)s, count(*), 1 FROM fresh HAVING count(*) > 0
    ON CONFLICT (user_id, conversation_id) DO UPDATE
        SET next_sequence = c.next_sequence + EXCLUDED.next_sequence,
            round_count = c.round_count + 1,
            updated_at = now()
    RETURNING c.next_sequence - (SELECT count(*) FROM fresh)::int AS first_sequence,
              c.next_sequence - 1 AS last_sequence, c.round_count AS round_number
), stored AS (
    INSERT INTO messages (tenant_id, user_id, conversation_id, sequence_number, round_number, role, content, message)
    SELECT %(tenant_id)s, %(user_id)s, %(conversation_id)s, conv.first_sequence + fresh.position - 1, conv.round_number,
           fresh.role, fresh.content, fresh.message
    FROM conv, fresh
    RETURNING sequence_number
)
SELECT conv.first_sequence, conv.last_sequence, conv.round_number,
       (SELECT count(*) FROM stored)::int AS stored,
       (SELECT array_agg(ord::int ORDER BY ord) FROM fresh) AS stored_positions
FROM (SELECT 1) AS one
LEFT JOIN conv ON true;

-- trigger_state --
-- Round end, trigger rule: the in-flight row, the latest completed memory and the round starts inside the window that
-- ends at `last_sequence` and is `window` messages long. `last_sequence` null: the conversation's last stored message,
-- so the round end sends this statement right behind save_round, in the same round trip.
WITH bound AS (
    SELECT GREATEST(0, COALESCE(%(last_sequence)s::integer,
                                (SELECT next_sequence - 1 FROM conversations
                                 WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s))
                       - %(window)s::integer + 1) AS from_sequence
)
SELECT p.memory_id AS processing_memory_id,
       EXTRACT(EPOCH FROM now() - COALESCE(p.started_at, p.created_at))::float8 AS processing_age_s,
       b.memory_id AS base_memory_id,
       b.end_sequence AS base_end_sequence,
       -- A round starts where the round number changes (a round's messages have consecutive sequences): read
       -- from one sequence earlier through the primary key, in its order. Looked up by round number instead,
       -- stale statistics sent both lookups through the round index (every message of the conversation).
       ARRAY(
           SELECT w.sequence_number
           FROM (
               SELECT sequence_number, round_number,
                      lag(round_number) OVER (ORDER BY sequence_number) AS previous_round
               FROM messages
               WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s
                 AND sequence_number >= (SELECT from_sequence FROM bound) - 1
           ) AS w
           WHERE w.sequence_number >= (SELECT from_sequence FROM bound)
             AND w.round_number IS DISTINCT FROM w.previous_round
           ORDER BY 1
       ) AS round_starts
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT memory_id, created_at, started_at FROM memory
    WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s AND status = 'processing'
) AS p ON true
LEFT JOIN LATERAL (
    SELECT memory_id, end_sequence FROM latest_memory
    WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s
    LIMIT 1
) AS b ON true;

-- insert_processing --
-- Claim the conversation's single in-flight slot; returns no row when another process holds it.
INSERT INTO memory (tenant_id, user_id, conversation_id, memory_text, start_sequence, end_sequence, base_memory_id, status)
VALUES (%(tenant_id)s, %(user_id)s, %(conversation_id)s, '', %(start_sequence)s, %(end_sequence)s, %(base_memory_id)s,
        'processing')
ON CONFLICT (user_id, conversation_id) WHERE status = 'processing' DO NOTHING
RETURNING memory_id;

-- reclaim_stale --
-- Mark stuck `processing` rows (memory_is_stuck with the timeout) as failed: one conversation, or all users (the sweep).
UPDATE memory
SET status = 'failed',
    finished_at = now(),
    error = format('reclaimed: processing for %%s s without finishing (timeout %%s s); the summarizer that owned it stopped or hung',
                   round(EXTRACT(EPOCH FROM now() - COALESCE(started_at, created_at)))::int,
                   %(timeout_s)s::int)
WHERE status = 'processing'
  AND memory_is_stuck(status, started_at, created_at, make_interval(secs => %(timeout_s)s), now())
  AND (%(conversation_id)s::text IS NULL
       OR (user_id = %(user_id)s::text AND conversation_id = %(conversation_id)s::text))
RETURNING memory_id, user_id, tenant_id, conversation_id;

-- start_memory --
-- A summarizer picks up a processing row; returns it with its base memory's text and end, and the messages it
-- summarizes (incremental: after the base memory, never before the window start), one row per message, oldest first
-- (one row with a null sequence_number when there are none). No row: the memory is no longer processing.
WITH target AS (
    UPDATE memory
    SET started_at = now(), attempts = attempts + 1
    WHERE user_id = %(user_id)s AND memory_id = %(memory_id)s AND status = 'processing'
    RETURNING memory_id, user_id, tenant_id, conversation_id, start_sequence, end_sequence, base_memory_id, attempts
), picked AS (
    SELECT target.*, b.memory_text AS base_memory_text, b.end_sequence AS base_end_sequence
    FROM target
    LEFT JOIN memory AS b ON b.user_id = target.user_id AND b.memory_id = target.base_memory_id
)
SELECT picked.*, m.sequence_number, m.message
FROM picked
LEFT JOIN LATERAL (
    SELECT sequence_number, message
    FROM messages
    WHERE user_id = picked.user_id AND conversation_id = picked.conversation_id
      AND sequence_number BETWEEN GREATEST(picked.start_sequence, COALESCE(picked.base_end_sequence + 1, 0))
                              AND picked.end_sequence
) AS m ON true
ORDER BY m.sequence_number;

-- complete_memory --
-- Record a finished summary, in the job's transaction, one statement: hold the conversation against erasure until
-- the version and its items commit (FOR KEY SHARE: rounds, which update the row but never its key, go on; a forget
-- takes FOR UPDATE and waits for the job, or ran first and left no row to hold), name the tenant row-level security
-- filters the items written next by (as set_tenant), and complete the row if it is still `processing` (not
-- reclaimed meanwhile), and record the model calls made for it in the ledger (record_llm_calls; none when
-- `call_purposes` is empty or null). No row: the conversation is gone or the version was reclaimed; nothing written.
WITH held AS (
    SELECT conversation_id, set_config('memory_agent.tenant_id', %(tenant_id)s, true) AS tenant_id
    FROM conversations
    WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s
    FOR KEY SHARE
)
UPDATE memory
SET status = 'completed', memory_text = %(memory_text)s, items = %(items)s, generation_time_ms = %(generation_time_ms)s,
    model_name = %(model_name)s, input_tokens = %(input_tokens)s, output_tokens = %(output_tokens)s,
    summarized_start = %(summarized_start)s, summarized_end = %(summarized_end)s,
    error = NULL, finished_at = now()
WHERE user_id = %(user_id)s AND memory_id = %(memory_id)s AND status = 'processing'
  AND conversation_id = %(conversation_id)s
  -- Uncorrelated: evaluated once, before the row is read, so the hold comes first whatever happens to the row.
  AND EXISTS (SELECT 1 FROM held)
RETURNING memory_id, CASE WHEN cardinality(%(call_purposes)s::text[]) > 0 THEN
    record_llm_calls(%(tenant_id)s, %(user_id)s, %(now)s, %(call_purposes)s::text[], %(call_models)s::text[],
                     %(call_input_tokens)s::integer[], %(call_output_tokens)s::integer[], %(call_costs)s::numeric[],
                     %(call_priced)s::boolean[])
END AS calls_recorded;

-- fail_memory --
-- Record a failed summary with its error text; only a row still in `processing` is updated.
UPDATE memory
SET status = 'failed', error = %(error)s, generation_time_ms = %(generation_time_ms)s,
    model_name = %(model_name)s, summarized_start = %(summarized_start)s,
    summarized_end = %(summarized_end)s, finished_at = now()
WHERE user_id = %(user_id)s AND memory_id = %(memory_id)s AND status = 'processing'
RETURNING memory_id;

-- get_memory --
-- One memory row by its key (user_id, memory_id).
SELECT * FROM memory WHERE user_id = %(user_id)s AND memory_id = %(memory_id)s;

-- list_memory --
-- Every memory version of a conversation, oldest first.
SELECT * FROM memory WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s ORDER BY memory_id;

-- insert_round_metrics --
-- Round end: the round's metrics row, written in the same transaction as its messages.
INSERT INTO round_metrics (
    tenant_id, user_id, conversation_id, round_number, first_sequence, last_sequence, memory_id, memory_end_sequence,
    gap_start_sequence, gap_end_sequence, gap_size, context_messages, context_tokens, truncated, truncation,
    retrieval_path, latency_load_ms, latency_round_ms, summary_triggered, trigger_outcome,
    triggered_memory_id, error_stage, error, query, fts_hits, trgm_hits, used_fallback, recall_path, context_items,
    estimated_tokens, recall_truncated, latency_retrieval_ms, latency_llm_ms, recall_status)
VALUES (
    %(tenant_id)s, %(user_id)s, %(conversation_id)s, %(round_number)s, %(first_sequence)s, %(last_sequence)s, %(memory_id)s,
    %(memory_end_sequence)s, %(gap_start_sequence)s, %(gap_end_sequence)s, %(gap_size)s,
    %(context_messages)s, %(context_tokens)s, %(truncated)s, %(truncation)s, %(retrieval_path)s,
    %(latency_load_ms)s, %(latency_round_ms)s, %(summary_triggered)s, %(trigger_outcome)s,
    %(triggered_memory_id)s, %(error_stage)s, %(error)s, %(query)s, %(fts_hits)s, %(trgm_hits)s, %(used_fallback)s,
    %(recall_path)s, %(context_items)s, %(estimated_tokens)s, %(recall_truncated)s, %(latency_retrieval_ms)s,
    %(latency_llm_ms)s, %(recall_status)s);

-- delete_conversation --
-- Remove a conversation and everything derived from it (messages, memory versions, round metrics, its owner row), in one statement.
WITH metrics AS (
    DELETE FROM round_metrics WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s
), leases AS (
    DELETE FROM round_leases WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s
), owner AS (
    DELETE FROM conversation_owners WHERE conversation_id = %(conversation_id)s AND user_id = %(user_id)s
)
DELETE FROM conversations WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s
RETURNING conversation_id;

-- schema_clash --
-- Tables with memory_agent's names in the schema when memory_agent's migrations table is not there.
SELECT ARRAY(
    SELECT c.relname::text FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = %(schema)s AND c.relname = ANY(%(tables)s::text[])
      AND NOT EXISTS (SELECT 1 FROM pg_class AS m JOIN pg_namespace AS mn ON mn.oid = m.relnamespace
                      WHERE mn.nspname = %(schema)s AND m.relname = 'schema_migrations')
    ORDER BY 1
) AS foreign_tables;

-- last_sequence --
-- The sequence number of a conversation's newest stored message (no row for an unknown conversation).
SELECT next_sequence - 1 AS last_sequence FROM conversations
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s AND next_sequence > 0;
