-- Named queries of scheduled consolidation (memory_agent/consolidation). Each block starts with `-- name --` and a
-- one-line description. `now` and every bound of time are parameters from the scheduler's clock, never now().

-- consolidation_due_users --
-- The users with something to consolidate whose job is due at `now` (no schedule row yet, or next_run passed).
WITH users AS (
    SELECT user_id, tenant_id FROM items WHERE NOT is_summary AND created_at < %(now)s
    UNION
    SELECT user_id, tenant_id FROM memory
    WHERE status = 'completed' AND COALESCE(finished_at, created_at) < %(now)s
)
SELECT u.user_id, u.tenant_id
FROM users AS u
LEFT JOIN consolidation_schedules AS s
    ON s.user_id = u.user_id AND s.tenant_id = u.tenant_id AND s.job = %(job)s
WHERE s.next_run IS NULL OR s.next_run <= %(now)s
ORDER BY u.tenant_id, u.user_id;

-- consolidation_schedule --
-- A user's schedule state for one job, and the UTC day of their first input (where a first run starts).
SELECT s.covered_until, s.last_run, s.next_run,
       (SELECT (min(at) AT TIME ZONE 'UTC')::date FROM (
            SELECT min(created_at) AS at FROM items
            WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND NOT is_summary
            UNION ALL
            SELECT min(COALESCE(finished_at, created_at)) FROM memory
            WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND status = 'completed'
        ) AS firsts) AS first_day
FROM (SELECT 1) AS one
LEFT JOIN consolidation_schedules AS s
    ON s.user_id = %(user_id)s AND s.tenant_id = %(tenant_id)s AND s.job = %(job)s;

-- advance_schedule --
-- Record progress (advance_schedule, sql/definitions): covered_until, last_run and next_run only move forward; a null
-- next_run leaves the user due; a user with no item and no memory left gets no row.
SELECT advance_schedule(%(user_id)s, %(tenant_id)s, %(job)s, %(schedule)s, %(interval_days)s::integer,
                        %(covered_until)s::date, %(now)s::timestamptz, %(next_run)s::timestamptz);

-- schedule_covered --
-- A user's covered_until of one job, as it is now (a forget that dropped notes moved it back).
SELECT covered_until FROM consolidation_schedules
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND job = %(job)s;

-- daily_inputs --
-- A user's material of [start, end): the long-term items written then and each conversation's latest memory, with
-- their lineage (the item or memory version, and the conversations it came from).
SELECT kind, at, text, item_id, memory_id, conversation_ids FROM (
    SELECT 'item' AS kind, i.created_at AS at, i.item_type || ' ' || i.key || ': ' || i.content AS text,
           i.item_id AS ord, i.item_id, NULL::bigint AS memory_id,
           ARRAY(SELECT DISTINCT s.conversation_id FROM item_sources AS s
                 WHERE s.user_id = i.user_id AND s.item_id = i.item_id AND s.conversation_id IS NOT NULL
                 ORDER BY 1) AS conversation_ids
    FROM items AS i
    WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND NOT i.is_summary
      AND i.created_at >= %(start)s AND i.created_at < %(end)s
    UNION ALL
    (SELECT DISTINCT ON (conversation_id) 'memory', COALESCE(finished_at, created_at), memory_text, memory_id,
            NULL, memory_id, ARRAY[conversation_id]
     FROM memory
     WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND status = 'completed' AND memory_text <> ''
       AND COALESCE(finished_at, created_at) >= %(start)s AND COALESCE(finished_at, created_at) < %(end)s
     ORDER BY conversation_id, end_sequence DESC, memory_id DESC)
) AS material
ORDER BY at, kind, ord;

-- notes_ending_between --
-- A user's notes of one period whose last day falls in [first_day, last_day], oldest first.
SELECT note_id, period, period_start, period_end, consolidated, insights, key_insights, notes_consolidated,
       created_at, source_item_ids, source_conversation_ids
FROM consolidation_notes
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND period = %(period)s
  AND period_end BETWEEN %(first_day)s AND %(last_day)s
ORDER BY period_start;

-- note_exists --
-- Whether the note of (user, period, period_start) is written (saves a model call; the insert still decides).
SELECT note_id, notes_consolidated FROM consolidation_notes
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND period = %(period)s
  AND period_start = %(period_start)s;

-- insert_note --
-- A note, once per (user, period, period_start), with its lineage: a repeat writes nothing unless forced, which
-- replaces it. Callers hold share_forget_lock and checked sources_present.
INSERT INTO consolidation_notes
    (user_id, tenant_id, period, period_start, period_end, content, consolidated, insights, key_insights,
     key_insights_text, notes_consolidated, model, input_tokens, output_tokens, created_at, source_item_ids,
     source_memory_ids, source_note_ids, source_conversation_ids)
VALUES (%(user_id)s, %(tenant_id)s, %(period)s, %(period_start)s, %(period_end)s, %(content)s, %(consolidated)s,
        %(insights)s, %(key_insights)s, array_to_string(%(key_insights)s::text[], E'\n'), %(notes_consolidated)s,
        %(model)s, %(input_tokens)s, %(output_tokens)s, %(now)s, %(source_item_ids)s, %(source_memory_ids)s,
        %(source_note_ids)s, %(source_conversation_ids)s)
ON CONFLICT ON CONSTRAINT consolidation_notes_once DO UPDATE
SET content = EXCLUDED.content, consolidated = EXCLUDED.consolidated, insights = EXCLUDED.insights,
    key_insights = EXCLUDED.key_insights, key_insights_text = EXCLUDED.key_insights_text,
    notes_consolidated = EXCLUDED.notes_consolidated, model = EXCLUDED.model,
    input_tokens = EXCLUDED.input_tokens, output_tokens = EXCLUDED.output_tokens, compacted_at = NULL,
    created_at = EXCLUDED.created_at, source_item_ids = EXCLUDED.source_item_ids,
    source_memory_ids = EXCLUDED.source_memory_ids, source_note_ids = EXCLUDED.source_note_ids,
    source_conversation_ids = EXCLUDED.source_conversation_ids
WHERE %(force)s
RETURNING note_id;

-- compact_dailies --
-- Daily notes that began before `before`: their raw content replaced by the consolidated text, once.
UPDATE consolidation_notes
SET content = consolidated, compacted_at = %(now)s
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND period = 'daily' AND compacted_at IS NULL
  AND period_start < %(before)s
RETURNING note_id;

-- list_notes --
-- Notes of a period (user and tenant optional), newest first.
SELECT note_id, tenant_id, user_id, period, period_start, period_end, key_insights, insights, notes_consolidated,
       compacted_at, model, input_tokens, output_tokens
FROM consolidation_notes
WHERE period = %(period)s
  AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
ORDER BY period_start DESC, tenant_id, user_id
LIMIT %(limit)s;

-- search_key_insights --
-- A user's notes whose key insights match the words of `words`, newest first.
SELECT note_id, period, period_start, period_end, key_insights
FROM consolidation_notes
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
  AND to_tsvector('simple'::regconfig, left(key_insights_text, 100000)) @@ plainto_tsquery('simple', %(words)s)
ORDER BY period_start DESC, period
LIMIT %(limit)s;

-- lock_batch_summaries --
-- Batch summarizers of one user take turns (until the transaction ends): a batch is checked and written at once.
SELECT pg_advisory_xact_lock(hashtextextended(
    concat_ws(chr(31), 'memory_agent.batch_summaries', %(user_id)s::text, %(tenant_id)s::text), 0));

-- batch_partitions --
-- The (project, environment) partitions of a user that hold items old enough and not yet summarized.
SELECT DISTINCT i.project, i.environment
FROM items AS i
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND NOT i.is_summary AND i.created_at < %(before)s
  AND NOT EXISTS (SELECT 1 FROM batch_summaries AS b
                  WHERE b.user_id = i.user_id AND b.tenant_id = i.tenant_id AND b.summarized_ids @> ARRAY[i.item_id])
ORDER BY 1, 2;

-- next_batch --
-- The oldest items of a partition that are old enough and in no batch summary yet, with the conversations each
-- came from.
SELECT i.item_id, i.item_type, i.key, i.content, i.created_at,
       ARRAY(SELECT DISTINCT s.conversation_id FROM item_sources AS s
             WHERE s.user_id = i.user_id AND s.item_id = i.item_id AND s.conversation_id IS NOT NULL
             ORDER BY 1) AS conversation_ids
FROM items AS i
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND i.project = %(project)s
  AND i.environment = %(environment)s AND NOT i.is_summary AND i.created_at < %(before)s
  AND NOT EXISTS (SELECT 1 FROM batch_summaries AS b
                  WHERE b.user_id = i.user_id AND b.tenant_id = i.tenant_id AND b.summarized_ids @> ARRAY[i.item_id])
ORDER BY i.created_at, i.item_id
LIMIT %(limit)s;

-- insert_batch_summary --
-- A batch's summary with its lineage, unless one of its items was summarized meanwhile (callers hold
-- lock_batch_summaries and share_forget_lock, and checked sources_present).
INSERT INTO batch_summaries
    (user_id, tenant_id, project, environment, content, first_item_id, summarized_ids, summarized_from,
     summarized_until, model, input_tokens, output_tokens, created_at, source_conversation_ids)
SELECT %(user_id)s, %(tenant_id)s, %(project)s, %(environment)s, %(content)s, (%(item_ids)s::bigint[])[1],
       %(item_ids)s::bigint[],
       %(summarized_from)s, %(summarized_until)s, %(model)s, %(input_tokens)s, %(output_tokens)s, %(now)s,
       %(conversation_ids)s::text[]
WHERE NOT EXISTS (SELECT 1 FROM batch_summaries
                  WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
                    AND summarized_ids && %(item_ids)s::bigint[])
ON CONFLICT ON CONSTRAINT batch_summaries_once DO NOTHING
RETURNING summary_id;

-- expired_originals --
-- Items a batch summary stands for whose keep_original_days are over (the TTL pass forgets them).
SELECT i.item_id
FROM items AS i
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND NOT i.is_summary AND i.created_at < %(before)s
  AND EXISTS (SELECT 1 FROM batch_summaries AS b
              WHERE b.user_id = i.user_id AND b.tenant_id = i.tenant_id AND b.summarized_ids @> ARRAY[i.item_id])
ORDER BY i.item_id;

-- list_batch_summaries --
-- A user's batch summaries, oldest first.
SELECT summary_id, project, environment, content, summarized_ids, summarized_from, summarized_until, model,
       created_at
FROM batch_summaries
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY summarized_from, summary_id;

-- claim_note --
-- Claim the note of (user, period, period_start) for this session, model call included: a second run of the same
-- note waits here, then finds it written. A session lock (no transaction stays open across the model call); the
-- holder releases it (release_note), or its connection's end does.
SELECT pg_advisory_lock(hashtextextended(
    concat_ws(chr(31), 'memory_agent.note', %(user_id)s::text, %(tenant_id)s::text, %(period)s::text,
              %(period_start)s::text), 0));

-- release_note --
-- Give back the claim of claim_note.
SELECT pg_advisory_unlock(hashtextextended(
    concat_ws(chr(31), 'memory_agent.note', %(user_id)s::text, %(tenant_id)s::text, %(period)s::text,
              %(period_start)s::text), 0)) AS released;
