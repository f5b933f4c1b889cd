-- Named queries of a user's memory as one document (memory_agent/transfer/): the export reads every row of the
-- user in one repeatable-read snapshot, in key order; the import writes them again under new ids. Each block starts
-- with `-- name --` and a one-line description; every statement runs with search_path set to the memory_agent schema.

-- snapshot_reads --
-- The export's transaction: one snapshot for all of its reads, read only.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY

-- export_conversations --
-- The user's conversations, by id.
SELECT conversation_id, round_count, created_at, updated_at
FROM conversations WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY conversation_id

-- export_messages --
-- The user's messages, by conversation and sequence.
SELECT conversation_id, sequence_number, round_number, role, content, message, created_at
FROM messages WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY conversation_id, sequence_number

-- export_memory --
-- The user's memory versions (completed and failed: a `processing` row is not a version yet), by id.
SELECT memory_id, conversation_id, memory_text, start_sequence, end_sequence, base_memory_id, status, created_at,
       generation_time_ms, error, model_name, input_tokens, output_tokens, summarized_start, summarized_end,
       attempts, started_at, finished_at, items
FROM memory WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND status <> 'processing'
ORDER BY memory_id

-- export_items --
-- The user's item versions (current and past) and cluster summaries, by id, with their validity.
SELECT item_id, project, environment, item_type, key, value_slot, content, content_norm, importance, confidence,
       lower(valid_during) AS valid_from, upper(valid_during) AS valid_to, is_summary, source_item_ids,
       created_at, updated_at, store_namespace, value
FROM items WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY item_id

-- export_item_sources --
-- Where the user's items came from (a turn, a memory version), by item and source id.
SELECT item_id, conversation_id, memory_id, sequence_number, created_at
FROM item_sources WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY item_id, source_id

-- export_notes --
-- The user's consolidation notes, by id.
SELECT note_id, period, period_start, period_end, content, consolidated, insights, key_insights, key_insights_text,
       notes_consolidated, model, input_tokens, output_tokens, compacted_at, created_at, source_item_ids,
       source_memory_ids, source_note_ids, source_conversation_ids
FROM consolidation_notes WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY note_id

-- export_batch_summaries --
-- The user's batch summaries, by id.
SELECT summary_id, project, environment, content, first_item_id, summarized_ids, summarized_from, summarized_until,
       model, input_tokens, output_tokens, created_at, source_conversation_ids
FROM batch_summaries WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY summary_id

-- export_schedules --
-- The user's consolidation schedules, by job.
SELECT job, schedule, interval_days, covered_until, last_run, next_run
FROM consolidation_schedules WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
ORDER BY job

-- new_ids --
-- `count` fresh ids of a table's key (memory, items, consolidation_notes, batch_summaries): ids a forgotten row had
-- in the document get one, so they name no row of this database.
SELECT nextval(pg_get_serial_sequence(%(table)s, %(column)s)) AS id FROM generate_series(1, %(count)s)

-- import_memory --
-- One memory version of an imported user, under a new id (its base mapped already).
INSERT INTO memory (tenant_id, user_id, conversation_id, memory_text, start_sequence, end_sequence, base_memory_id,
                    status, created_at, generation_time_ms, error, model_name, input_tokens, output_tokens,
                    summarized_start, summarized_end, attempts, started_at, finished_at, items)
VALUES (%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(memory_text)s, %(start_sequence)s, %(end_sequence)s,
        %(base_memory_id)s, %(status)s, %(created_at)s, %(generation_time_ms)s, %(error)s, %(model_name)s,
        %(input_tokens)s, %(output_tokens)s, %(summarized_start)s, %(summarized_end)s, %(attempts)s,
        %(started_at)s, %(finished_at)s, %(items)s)
RETURNING memory_id

-- import_item --
-- One item version of an imported user, under a new id, with its validity (its members are set by
-- import_item_members once every item has its new id).
INSERT INTO items (tenant_id, user_id, project, environment, item_type, key, value_slot, content, content_norm,
                   importance, confidence, valid_during, is_summary, source_item_ids, created_at, updated_at,
                   store_namespace, value)
VALUES (%(tenant_id)s, %(user_id)s, %(project)s, %(environment)s, %(item_type)s, %(key)s, %(value_slot)s,
        %(content)s, %(content_norm)s, %(importance)s, %(confidence)s,
        tstzrange(%(valid_from)s::timestamptz, %(valid_to)s::timestamptz), %(is_summary)s, '{}', %(created_at)s,
        %(updated_at)s, %(store_namespace)s, %(value)s)
RETURNING item_id

-- import_item_members --
-- A cluster summary's members, under their new ids.
UPDATE items SET source_item_ids = %(source_item_ids)s
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = %(item_id)s

-- import_item_source --
-- Where an imported item came from (ids mapped).
INSERT INTO item_sources (tenant_id, user_id, item_id, conversation_id, memory_id, sequence_number, created_at)
VALUES (%(tenant_id)s, %(user_id)s, %(item_id)s, %(conversation_id)s, %(memory_id)s, %(sequence_number)s,
        %(created_at)s)

-- import_note --
-- One consolidation note of an imported user, under a new id (the notes it was made from mapped already).
INSERT INTO consolidation_notes (tenant_id, user_id, period, period_start, period_end, content, consolidated,
                                 insights, key_insights, key_insights_text, notes_consolidated, model, input_tokens,
                                 output_tokens, compacted_at, created_at, source_item_ids, source_memory_ids,
                                 source_note_ids, source_conversation_ids)
VALUES (%(tenant_id)s, %(user_id)s, %(period)s, %(period_start)s, %(period_end)s, %(content)s, %(consolidated)s,
        %(insights)s, %(key_insights)s, %(key_insights_text)s, %(notes_consolidated)s, %(model)s, %(input_tokens)s,
        %(output_tokens)s, %(compacted_at)s, %(created_at)s, %(source_item_ids)s, %(source_memory_ids)s,
        %(source_note_ids)s, %(source_conversation_ids)s)
RETURNING note_id

-- import_batch_summary --
-- One batch summary of an imported user, under a new id (its items mapped).
INSERT INTO batch_summaries (tenant_id, user_id, project, environment, content, first_item_id, summarized_ids,
                             summarized_from, summarized_until, model, input_tokens, output_tokens, created_at,
                             source_conversation_ids)
VALUES (%(tenant_id)s, %(user_id)s, %(project)s, %(environment)s, %(content)s, %(first_item_id)s,
        %(summarized_ids)s, %(summarized_from)s, %(summarized_until)s, %(model)s, %(input_tokens)s,
        %(output_tokens)s, %(created_at)s, %(source_conversation_ids)s)

-- import_schedule --
-- One consolidation schedule of an imported user.
INSERT INTO consolidation_schedules (tenant_id, user_id, job, schedule, interval_days, covered_until, last_run,
                                     next_run)
VALUES (%(tenant_id)s, %(user_id)s, %(job)s, %(schedule)s, %(interval_days)s, %(covered_until)s, %(last_run)s,
        %(next_run)s)

-- import_next_sequence --
-- An imported conversation's next sequence, after its messages.
UPDATE conversations SET next_sequence = %(next_sequence)s
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND conversation_id = %(conversation_id)s
