-- Named queries of the recall evaluation (memory_agent/evaluation/ingest.py): a LoCoMo-format sample written
-- straight into the tables. Every statement runs with search_path set to the memory_agent schema.

-- eval_insert_conversation --
-- Evaluation ingestion: a conversation of one user whose turns are stored directly (not through the round
-- path), with its owner row as a round's first save writes it.
WITH owner AS (
    INSERT INTO conversation_owners (conversation_id, tenant_id, user_id, created_at)
    VALUES (%(conversation_id)s, %(tenant_id)s, %(user_id)s, %(created_at)s)
)
INSERT INTO conversations (user_id, tenant_id, conversation_id, next_sequence, round_count, created_at, updated_at)
VALUES (%(user_id)s, %(tenant_id)s, %(conversation_id)s, %(next_sequence)s, %(round_count)s, %(created_at)s,
        %(created_at)s)

-- eval_insert_message --
-- Evaluation ingestion: one stored turn.
INSERT INTO messages (user_id, tenant_id, conversation_id, sequence_number, round_number, role, content, message,
                      created_at)
VALUES (%(user_id)s, %(tenant_id)s, %(conversation_id)s, %(sequence_number)s, %(round_number)s, %(role)s,
        %(content)s, %(message)s, %(created_at)s)

-- eval_close_item --
-- Evaluation ingestion: a new value of a single-valued key closes the current one at `now`.
UPDATE items SET valid_during = tstzrange(lower(valid_during), %(now)s)
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = '' AND environment = ''
  AND item_type = %(item_type)s AND key = %(key)s AND value_slot = %(value_slot)s
  AND upper_inf(valid_during) AND lower(valid_during) < %(now)s AND content_norm <> %(content_norm)s

-- eval_insert_item --
-- Evaluation ingestion: one item (or cluster summary), unless the same content is current in its slot.
INSERT INTO items (user_id, tenant_id, item_type, key, value_slot, content, content_norm, importance, valid_during,
                   is_summary, source_item_ids)
SELECT %(user_id)s, %(tenant_id)s, %(item_type)s, %(key)s, %(value_slot)s, %(content)s, %(content_norm)s,
       %(importance)s, tstzrange(%(valid_from)s, %(valid_to)s), %(is_summary)s, %(source_item_ids)s
WHERE NOT EXISTS (SELECT 1 FROM items WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
                  AND project = '' AND environment = '' AND item_type = %(item_type)s AND key = %(key)s
                  AND value_slot = %(value_slot)s AND content_norm = %(content_norm)s AND upper_inf(valid_during))
RETURNING item_id

-- eval_insert_item_source --
-- Evaluation ingestion: a turn an item came from.
INSERT INTO item_sources (user_id, tenant_id, item_id, conversation_id, memory_id, sequence_number)
VALUES (%(user_id)s, %(tenant_id)s, %(item_id)s, %(conversation_id)s, NULL, %(sequence_number)s)
ON CONFLICT DO NOTHING

-- eval_turns_without_vector --
-- Evaluation: how many of a user's turns (as turns_to_embed reads them) have no vector of `model` made from the
-- current `text_version`.
SELECT count(*) AS missing
FROM messages AS m
WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s AND m.role IN ('user', 'assistant')
  AND m.content <> ''
  AND NOT EXISTS (SELECT 1 FROM message_embeddings AS e
                  WHERE e.user_id = m.user_id AND e.conversation_id = m.conversation_id
                    AND e.sequence_number = m.sequence_number AND e.model = %(model)s
                    AND e.text_version = %(text_version)s)

-- eval_stored_turns --
-- Evaluation: a user's stored turns, in order (the load checks them against the dataset's).
SELECT m.conversation_id, m.sequence_number, m.content
FROM messages AS m
WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s AND m.role IN ('user', 'assistant')
ORDER BY m.conversation_id, m.sequence_number

-- eval_long_term_volume --
-- Evaluation: what the load wrote in the evaluation's tenant: completed summaries, item rows, cluster summaries.
SELECT (SELECT count(*) FROM memory WHERE tenant_id = %(tenant_id)s AND status = 'completed') AS summaries,
       (SELECT count(*) FROM items WHERE tenant_id = %(tenant_id)s AND NOT is_summary) AS items,
       (SELECT count(*) FROM items WHERE tenant_id = %(tenant_id)s AND is_summary) AS cluster_summaries
