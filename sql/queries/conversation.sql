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

-- row_security_active --
-- Whether row-level security binds the connected role (it neither owns the tables nor bypasses the policies).
SELECT row_security_active('messages') AS active;

-- name_tenant --
-- The tenant row-level security filters this session's statements by ('': none, no row at all).
SELECT set_config('memory_agent.tenant_id', %(tenant_id)s, false);

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
-- Failure, cancellation or interrupt: give the conversation's lease back (release_round_lease, sql/definitions; the
-- round end's end_round gives it back in its transaction).
SELECT release_round_lease(%(user_id)s, %(conversation_id)s, %(holder)s);

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

-- end_round --
-- Round end (end_round, sql/definitions): give the lease back, store the round's messages not stored yet, and read
-- the trigger rule's state after them. One row (`stored` 0 when nothing was new).
SELECT * FROM end_round(%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(holder)s, %(round)s::jsonb,
                        %(window)s::integer);

-- trigger_state --
-- The trigger rule's state (trigger_state, sql/definitions) for the window of `window` messages that ends at
-- `last_sequence`.
SELECT * FROM trigger_state(%(user_id)s, %(conversation_id)s, %(last_sequence)s::integer, %(window)s::integer);

-- claim_summary --
-- Claim the conversation's single in-flight slot (claim_summary, sql/definitions): memory_id null when another
-- process holds it.
SELECT claim_summary(%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(start_sequence)s::integer,
                     %(end_sequence)s::integer, %(base_memory_id)s::integer) AS memory_id;

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
-- Record a finished summary (finished_at: the service's clock, which day's material it is), in the job's
-- transaction, one statement: hold the conversation against erasure until
-- the version and its items commit (FOR KEY SHARE: rounds, which update the row but never its key, go on; a forget
-- takes FOR UPDATE and waits for the job, or ran first and left no row to hold), name the tenant row-level security
-- filters the items written next by (as set_tenant), and complete the row if it is still `processing` (not
-- reclaimed meanwhile), and record the model calls made for it in the ledger (record_llm_calls; none when
-- `calls` is empty or null). No row: the conversation is gone or the version was reclaimed; nothing written.
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
    error = NULL, finished_at = %(finished_at)s
WHERE user_id = %(user_id)s AND memory_id = %(memory_id)s AND status = 'processing'
  AND conversation_id = %(conversation_id)s
  -- Uncorrelated: evaluated once, before the row is read, so the hold comes first whatever happens to the row.
  AND EXISTS (SELECT 1 FROM held)
RETURNING memory_id, CASE WHEN jsonb_array_length(%(calls)s::jsonb) > 0 THEN
    record_llm_calls(%(tenant_id)s, %(user_id)s, %(now)s, %(calls)s::jsonb)
END AS calls_recorded;

-- fail_memory --
-- Record a failed summary with its error text (finished_at: the service's clock); only a row still in
-- `processing` is updated.
UPDATE memory
SET status = 'failed', error = %(error)s, generation_time_ms = %(generation_time_ms)s,
    model_name = %(model_name)s, summarized_start = %(summarized_start)s,
    summarized_end = %(summarized_end)s, finished_at = %(finished_at)s
WHERE user_id = %(user_id)s AND memory_id = %(memory_id)s AND status = 'processing'
RETURNING memory_id;

-- get_memory --
-- One memory row by its key (user_id, memory_id).
SELECT * FROM memory WHERE user_id = %(user_id)s AND memory_id = %(memory_id)s;

-- list_memory --
-- Every memory version of a conversation, oldest first.
SELECT * FROM memory WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s ORDER BY memory_id;

-- insert_round_metrics --
-- Round end: the round's metrics row, written in the same transaction as its messages. `claim`: the trigger rule
-- found a summary due and this statement claims it (claim_summary) for start_sequence-end_sequence, recording the
-- outcome: 'started' and the new row's id, or 'already_processing' when another process holds the slot. Else the
-- outcome given. Returns the claimed id (null when none), read with COMMIT's reply. With `pick_up` (this process
-- runs the summary right after commit) the claim picks the row up too, and the statement returns what start_memory
-- would read for it: the base memory's text and end, and the messages to summarize (incremental: after the base
-- memory, never before the window start), oldest first; all null when nothing was claimed.
WITH claim AS (
    SELECT claim_summary(%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(start_sequence)s::integer,
                         %(end_sequence)s::integer, %(base_memory_id)s::integer, %(pick_up)s::boolean) AS memory_id
    WHERE %(claim)s::boolean
), picked AS (
    SELECT b.memory_text AS base_memory_text, b.end_sequence AS base_end_sequence, w.sequences, w.messages
    FROM claim
    LEFT JOIN memory AS b ON b.user_id = %(user_id)s AND b.memory_id = %(base_memory_id)s::integer
    CROSS JOIN LATERAL (
        SELECT array_agg(m.sequence_number ORDER BY m.sequence_number) AS sequences,
               array_agg(m.message ORDER BY m.sequence_number) AS messages
        FROM messages AS m
        WHERE m.user_id = %(user_id)s AND m.conversation_id = %(conversation_id)s
          AND m.sequence_number BETWEEN GREATEST(%(start_sequence)s::integer, COALESCE(b.end_sequence + 1, 0))
                                    AND %(end_sequence)s::integer
    ) AS w
    WHERE %(pick_up)s::boolean AND claim.memory_id IS NOT NULL
)
INSERT INTO round_metrics (
    tenant_id, user_id, conversation_id, round_number, first_sequence, last_sequence, memory_id, memory_end_sequence,
    gap_start_sequence, gap_end_sequence, gap_size, context_messages, context_tokens, truncated, truncation,
    retrieval_path, latency_load_ms, latency_round_ms, summary_triggered, trigger_outcome,
    triggered_memory_id, error_stage, error, query, fts_hits, trgm_hits, used_fallback, recall_path, context_items,
    estimated_tokens, recall_truncated, latency_retrieval_ms, latency_llm_ms, recall_status, recall_block, recall_hits)
VALUES (
    %(tenant_id)s, %(user_id)s, %(conversation_id)s, %(round_number)s, %(first_sequence)s, %(last_sequence)s, %(memory_id)s,
    %(memory_end_sequence)s, %(gap_start_sequence)s, %(gap_end_sequence)s, %(gap_size)s,
    %(context_messages)s, %(context_tokens)s, %(truncated)s, %(truncation)s, %(retrieval_path)s,
    %(latency_load_ms)s, %(latency_round_ms)s,
    COALESCE((SELECT memory_id IS NOT NULL FROM claim), %(summary_triggered)s),
    COALESCE((SELECT CASE WHEN memory_id IS NULL THEN 'already_processing' ELSE 'started' END FROM claim),
             %(trigger_outcome)s),
    COALESCE((SELECT memory_id FROM claim), %(triggered_memory_id)s),
    %(error_stage)s, %(error)s, %(query)s, %(fts_hits)s, %(trgm_hits)s, %(used_fallback)s,
    %(recall_path)s, %(context_items)s, %(estimated_tokens)s, %(recall_truncated)s, %(latency_retrieval_ms)s,
    %(latency_llm_ms)s, %(recall_status)s, %(recall_block)s, %(recall_hits)s)
RETURNING triggered_memory_id, (SELECT base_memory_text FROM picked) AS base_memory_text,
          (SELECT base_end_sequence FROM picked) AS base_end_sequence,
          (SELECT sequences FROM picked) AS picked_sequences, (SELECT messages FROM picked) AS picked_messages;

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

-- analyze_young_tables --
-- ANALYZE the round path's tables that grew past twice their analyzed size (analyze_young_tables, sql/definitions).
SELECT analyze_young_tables(%(min_changes)s::bigint, %(max_rows)s::bigint) AS analyzed;
