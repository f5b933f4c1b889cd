-- Named queries of imports (memory_agent/conversation/imports.py: a thread's messages with their own times;
-- memory_agent/transfer/load.py writes a user document's conversations with them). Each block starts with
-- `-- name --` and a one-line description; every statement runs with search_path set to the memory_agent schema.

-- import_conversation --
-- An imported thread's conversation row, unless the thread has one already (no row: nothing written). `now`: the
-- service's clock (the row's created_at, as a round's first save writes it); `updated_at`: its last message's time
-- (a thread streamed in: its first message's, until import_thread_end).
INSERT INTO conversations AS c
    (tenant_id, user_id, conversation_id, next_sequence, round_count, created_at, updated_at)
VALUES (%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(next_sequence)s, %(round_count)s, %(now)s,
        %(updated_at)s)
ON CONFLICT (user_id, conversation_id) DO NOTHING
RETURNING c.created_at

-- import_message --
-- One imported message, with the time it was written in its conversation (not the time of the import).
INSERT INTO messages (tenant_id, user_id, conversation_id, sequence_number, round_number, role, content, message,
                      created_at)
VALUES (%(tenant_id)s, %(user_id)s, %(conversation_id)s, %(sequence_number)s, %(round_number)s, %(role)s,
        %(content)s, %(message)s::jsonb, %(created_at)s)

-- import_duplicate_id --
-- The first message of an imported batch (sequences `first` to `last`) whose id an earlier message of the thread
-- holds, and the first that holds it (no row: every id of the batch is the thread's only one so far). Read through
-- idx_messages_conversation_message_id: a batch costs its own rows, whatever the thread's length.
SELECT b.sequence_number, b.message_id, min(m.sequence_number) AS first_sequence
FROM messages AS b
JOIN messages AS m
    ON m.user_id = b.user_id AND m.conversation_id = b.conversation_id AND m.message_id = b.message_id
   AND m.sequence_number < b.sequence_number
WHERE b.user_id = %(user_id)s AND b.conversation_id = %(conversation_id)s
  AND b.sequence_number BETWEEN %(first)s AND %(last)s AND b.message_id IS NOT NULL
GROUP BY b.sequence_number, b.message_id
ORDER BY b.sequence_number
LIMIT 1

-- import_thread_end --
-- An imported thread's counts once its last message is written: the next sequence, its rounds, its last time.
UPDATE conversations
SET next_sequence = %(next_sequence)s, round_count = %(round_count)s, updated_at = %(updated_at)s
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND conversation_id = %(conversation_id)s

-- import_owner --
-- An imported thread's owner (tenant, user), as a round's first claim records it, unless the thread has one: the
-- owner either way (row-level security may hide another tenant's: no row).
WITH claimed AS (
    INSERT INTO conversation_owners (conversation_id, tenant_id, user_id, created_at)
    VALUES (%(conversation_id)s, %(tenant_id)s, %(user_id)s, %(now)s)
    ON CONFLICT (conversation_id) DO NOTHING
    RETURNING tenant_id, user_id
)
SELECT tenant_id, user_id FROM claimed
UNION ALL
SELECT o.tenant_id, o.user_id FROM conversation_owners AS o
WHERE o.conversation_id = %(conversation_id)s AND NOT EXISTS (SELECT 1 FROM claimed)
