-- Named queries of forgetting (memory_agent/long_term/forget.py) and of the writers of derived rows that must
-- lose every race against it. Each block starts with `-- name --` and a one-line description.

-- lock_forget --
-- A forget of the user holds this until it commits: writers of derived rows (consolidation notes, batch summaries,
-- cluster summaries) take it shared before they write, so each either commits before the forget reads what to
-- erase, or writes after it and then re-checks that its sources still exist.
SELECT pg_advisory_xact_lock(hashtextextended(
    concat_ws(chr(31), 'memory_agent.forget', %(user_id)s::text, %(tenant_id)s::text), 0));

-- share_forget_lock --
-- A writer of derived rows waits for a forget of the user in progress (held until the writer's transaction ends).
SELECT pg_advisory_xact_lock_shared(hashtextextended(
    concat_ws(chr(31), 'memory_agent.forget', %(user_id)s::text, %(tenant_id)s::text), 0));

-- try_share_forget_lock --
-- As share_forget_lock, without waiting (a writer that holds other locks a forget takes after this one): false
-- while a forget of the user is in progress.
SELECT pg_try_advisory_xact_lock_shared(hashtextextended(
    concat_ws(chr(31), 'memory_agent.forget', %(user_id)s::text, %(tenant_id)s::text), 0)) AS held;

-- sources_present --
-- Whether every item, memory version and note a derived row was made from still exists (after share_forget_lock,
-- in a statement of its own: it reads what a forget committed meanwhile).
SELECT (SELECT count(*) FROM items
        WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = ANY(%(item_ids)s::bigint[]))
           = cardinality(%(item_ids)s::bigint[])
   AND (SELECT count(*) FROM memory
        WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND memory_id = ANY(%(memory_ids)s::bigint[]))
           = cardinality(%(memory_ids)s::bigint[])
   AND (SELECT count(*) FROM consolidation_notes
        WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND note_id = ANY(%(note_ids)s::bigint[]))
           = cardinality(%(note_ids)s::bigint[]) AS present;

-- user_present --
-- Whether the user still has items or conversations (after share_forget_lock: false once forget_user committed).
SELECT EXISTS (SELECT 1 FROM items WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s)
    OR EXISTS (SELECT 1 FROM conversations WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s) AS present;

-- drop_derived --
-- Erase the consolidation notes and batch summaries made from any of the given items or conversations (or written
-- before lineage was recorded), and move the nightly schedule back before the earliest dropped note, so the next
-- run makes those notes again from what is left. Returns the dropped notes' ids (batches: batch_id).
WITH notes AS (
    DELETE FROM consolidation_notes
    WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
      AND (source_item_ids IS NULL OR source_conversation_ids IS NULL
           OR source_item_ids && %(item_ids)s::bigint[]
           OR source_conversation_ids && %(conversation_ids)s::text[])
    RETURNING note_id, period_start
), batches AS (
    DELETE FROM batch_summaries
    WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
      AND (source_conversation_ids IS NULL
           OR summarized_ids && %(item_ids)s::bigint[]
           OR source_conversation_ids && %(conversation_ids)s::text[])
    RETURNING summary_id
), reopened AS (
    UPDATE consolidation_schedules
    SET covered_until = (SELECT min(period_start) FROM notes) - 1
    WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND job = 'nightly'
      AND covered_until >= (SELECT min(period_start) FROM notes)
)
SELECT note_id, NULL::bigint AS batch_id FROM notes
UNION ALL
SELECT NULL, summary_id FROM batches;

-- procrastinate_installed --
-- Whether procrastinate's job table is in the schema (only with the procrastinate executor).
SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS installed;

-- erase_user_jobs --
-- Jobs not running (waiting or finished) whose arguments name the user: summary jobs of the memory versions being
-- erased (`memory_ids`), and with `whole_user` every job naming the tenant and the user (consolidation's).
DELETE FROM procrastinate_jobs
WHERE status <> 'doing' AND args ->> 'user_id' = %(user_id)s
  AND ((%(whole_user)s AND args ->> 'tenant_id' = %(tenant_id)s)
       OR (task_name = 'memory_agent.summarize' AND (args ->> 'memory_id')::bigint = ANY(%(memory_ids)s::bigint[])))
RETURNING id;

-- user_memory_ids --
-- The memory versions of the user (all conversations) or of one conversation: the summary jobs that name them.
SELECT memory_id FROM memory
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
  AND (%(conversation_id)s::text IS NULL OR conversation_id = %(conversation_id)s);

-- pseudonymise_user_ledger --
-- The ledger rows of a forgotten user move to user '' (the tenant's rows of no user): the tenant's spend and call
-- counts stay whole, nothing names the user (pseudonymise_user_ledger, sql/definitions). The number of calls moved.
SELECT pseudonymise_user_ledger(%(tenant_id)s, %(user_id)s) AS moved;

-- erase_user_traces --
-- Every round metrics row and lease of the user, those of threads nothing was stored of included (a failed first
-- round writes its metrics row; no conversation row names it).
WITH leases AS (
    DELETE FROM round_leases WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
)
DELETE FROM round_metrics WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s;

-- user_threads --
-- The threads whose owner row names the user: those of their conversations, of threads whose first round stored
-- nothing, and of an erasure that failed before it released them. On Citus a read of every shard of the owners.
SELECT conversation_id FROM conversation_owners
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY conversation_id;

-- release_thread --
-- After an erasure committed, in a transaction of its own: the thread's owner row, when it names the user and they
-- have no conversation or lease of that id (release_thread, sql/definitions). `released` true when the row went.
SELECT release_thread(%(tenant_id)s, %(user_id)s, %(conversation_id)s) AS released;
