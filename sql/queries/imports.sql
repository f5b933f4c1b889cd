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
-- The first message of an imported batch (`sequences` and their `message_ids`, the batch's messages that have
-- one, written already) whose id an earlier message of the thread holds, and the first that holds it (no row:
-- each is its id's only message so far). One lookup of idx_messages_conversation_message_id per id: a batch costs
-- its own messages, whatever the thread's length.
SELECT b.sequence_number, b.message_id, f.first_sequence
FROM unnest(%(sequences)s::integer[], %(message_ids)s::text[]) AS b (sequence_number, message_id)
CROSS JOIN LATERAL (
    SELECT min(m.sequence_number) AS first_sequence
    FROM messages AS m
    WHERE m.user_id = %(user_id)s AND m.conversation_id = %(conversation_id)s AND m.message_id = b.message_id
      AND m.message_id IS NOT NULL
) AS f
WHERE f.first_sequence < b.sequence_number
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
