-- Named queries of imports (memory_agent/conversation/imports.py: a thread's messages with their own times;
-- memory_agent/transfer/load.py writes a user document's conversations with them). Each block starts with
-- `-- name --` and a one-line description; every statement runs with search_path set to the memory_agent schema.

-- import_conversation --
-- An imported thread's conversation row, unless the thread has one already (no row: nothing written). `now`: the
-- service's clock (the row's created_at, as a round's first save writes it); `updated_at`: its last message's time.
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
