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
-- Whether row-level security binds the connected role (it neither owns the tables nor bypasses the policies); false
-- before the schema has its tables.
SELECT COALESCE(row_security_active(to_regclass('messages')), false) AS active;

-- name_tenant --
-- The tenant row-level security filters this session's statements by ('': none, no row at all).
SELECT set_config('memory_agent.tenant_id', %(tenant_id)s, false);

-- acquire_round_lease --
-- Take the conversation's lease when its recorded owner is the caller (take_round_lease, sql/definitions): one row,
-- the owner (null: the thread has none yet, claim_conversation first) and `holder` (null: refused or not theirs).
SELECT * FROM take_round_lease(%(conversation_id)s, %(tenant_id)s, %(user_id)s, %(holder)s, %(lease_s)s::float8);

-- claim_conversation --
-- A thread's first round: record its owner (tenant, user), unless another round did first (no row: read it with
-- conversation_owner). A statement of its own, before the lease: keyed by the thread id, not the user.
INSERT INTO conversation_owners (conversation_id, tenant_id, user_id)
VALUES (%(conversation_id)s, %(tenant_id)s, %(user_id)s)
ON CONFLICT (conversation_id) DO NOTHING
RETURNING tenant_id, user_id;

-- begin_round --
-- The round start in one statement (begin_round, sql/definitions): the lease, then memory + gap.
SELECT * FROM begin_round(%(conversation_id)s, %(tenant_id)s, %(user_id)s, %(holder)s, %(lease_s)s::float8,
                          %(message_ids)s::text[], %(max_gap)s::integer);

-- conversation_owner --
-- The (tenant, user) a conversation id belongs to (no row for a thread no round has named yet).
SELECT tenant_id, user_id FROM conversation_owners WHERE conversation_id = %(conversation_id)s;

-- tenant_conversation_owner --
-- The user a conversation id belongs to in one tenant (no row when another tenant's, or not named yet): a call by
-- thread id that names the tenant and no user (delete_conversation(thread, tenant_id=...)) acts on that user's rows.
SELECT tenant_id, user_id FROM conversation_owners
WHERE conversation_id = %(conversation_id)s AND tenant_id = %(tenant_id)s;

-- release_round_lease --
-- Failure, cancellation or interrupt: give the conversation's lease back (release_round_lease, sql/definitions; the
-- round end's end_round gives it back in its transaction).
SELECT release_round_lease(%(user_id)s, %(conversation_id)s, %(holder)s);

-- round_lease_holder --
-- The token of the conversation's lease (no row: none is held). A round resumed in another process reads it to
-- renew the lease it held before its pause: graph state names that lease by a digest only (lease_reference).
SELECT holder FROM round_leases WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s;

-- pass_round_lease --
-- A paused round's lease passed to the run that takes it over (a resume in another process, or a new message on
-- the paused thread): its holder becomes `new_holder` when it is still `holder`. Once: a second run naming the same
-- round finds another holder, and waits or is refused as any round would (no two rounds on one lease).
UPDATE round_leases SET holder = %(new_holder)s
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s AND holder = %(holder)s
RETURNING holder;

-- gap_cap_cause --
-- Why a round's gap hit the bound: the newest memory row of the conversation and how many rounds no memory covers.
SELECT newest.status AS latest_status, newest.error AS latest_error,
       c.round_count - COALESCE((SELECT e.round_number FROM messages AS e
                                 WHERE e.user_id = %(user_id)s AND e.conversation_id = %(conversation_id)s
                                   AND e.sequence_number = %(memory_end_sequence)s), 0) AS rounds_behind
FROM conversations AS c
LEFT JOIN LATERAL (
    -- Every table with the user's key as given: on Citus the statement is routed to their shard.
    SELECT status, error FROM memory
    WHERE memory.user_id = %(user_id)s AND memory.conversation_id = %(conversation_id)s
    ORDER BY memory_id DESC
    LIMIT 1
) AS newest ON true
WHERE c.user_id = %(user_id)s AND c.conversation_id = %(conversation_id)s;

-- end_round --
-- Round end (end_round, sql/definitions): give the lease back, store the round's messages not stored yet, apply the
-- trigger rule after them (reclaim a stale row, claim a due summary) and write the metrics row (`metrics` null:
-- none). One row (`stored` 0 when nothing was new; `erased` when the conversation the round started on was erased
-- meanwhile: nothing stored). `now`: the service's clock.
SELECT * FROM end_round(%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(holder)s, %(round)s::jsonb,
                        %(window)s::integer, %(now)s::timestamptz, %(started_on)s::timestamptz, %(metrics)s::jsonb,
                        %(summarize_after)s::integer, %(min_new)s::integer, %(timeout_s)s::float8,
                        %(pick_up)s::boolean);

-- trigger_state --
-- The trigger rule's state (trigger_state, sql/definitions) for the window of `window` messages that ends at
-- `last_sequence`.
SELECT * FROM trigger_state(%(user_id)s, %(conversation_id)s, %(last_sequence)s::integer, %(window)s::integer);

-- claim_summary --
-- Claim the conversation's single in-flight slot (claim_summary, sql/definitions): memory_id null when another
-- process holds it. With `pick_up`, the claimer picks the row up and the row carries what its summary reads.
SELECT memory_id, base_memory_text, base_end_sequence, picked_sequences, picked_messages
FROM claim_summary(%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(start_sequence)s::integer,
                   %(end_sequence)s::integer, %(base_memory_id)s::integer, %(pick_up)s::boolean);

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
-- A summarizer picks up a processing row (start_memory, sql/definitions): the row with its base memory's text and
-- end, and the messages it summarizes, one row per message, oldest first (one row with a null sequence_number when
-- there are none). No row: the memory is no longer processing.
SELECT * FROM start_memory(%(user_id)s, %(memory_id)s::integer);

-- complete_memory --
-- Record a finished summary and the model calls made for it (complete_memory, sql/definitions), holding its
-- conversation against erasure and naming the tenant for row-level security until commit. memory_id null: the
-- conversation is gone or the version was reclaimed; nothing written.
SELECT complete_memory(%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(memory_id)s::integer, %(memory_text)s,
                       %(items)s::jsonb, %(generation_time_ms)s::integer, %(model_name)s, %(input_tokens)s::integer,
                       %(output_tokens)s::integer, %(summarized_start)s::integer, %(summarized_end)s::integer,
                       %(finished_at)s::timestamptz, %(now)s::timestamptz, %(calls)s::jsonb) AS memory_id;

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

-- record_failed_round --
-- A failed round's metrics row (record_failed_round, sql/definitions), unless the conversation it started on was
-- erased since: `recorded` false, nothing written.
SELECT * FROM record_failed_round(%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(started_on)s::timestamptz,
                                  %(metrics)s::jsonb);

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
