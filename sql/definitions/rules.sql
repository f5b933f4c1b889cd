-- Rules that more than one statement applies, defined once. Re-created with every definitions file when one
-- of them changes (see memory_agent/db/migrate.py); never copied into a numbered migration.

-- "Stuck processing": a `processing` row whose summarizer went quiet (no pick-up since it was created or
-- last started) for longer than `timeout` at time `at`. The reclaimer (processing_timeout_s), the
-- stuck_processing_after() listing and memory_health's `stuck` count all apply this function.
-- Scalar arguments and no table read: the planner inlines it, so a caller's indexes still apply.
CREATE FUNCTION memory_is_stuck(
    status text, started_at timestamptz, created_at timestamptz, timeout interval, at timestamptz
)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT status = 'processing' AND COALESCE(started_at, created_at) < at - timeout
$$;

-- "The latest completed memory of a conversation": the memory a round is given, the base of the next
-- summary. Filter on user_id and conversation_id: both are DISTINCT ON columns, so the filter is pushed
-- into the view and read as the first entry of idx_memory_conversation_status.
CREATE VIEW latest_memory AS
SELECT DISTINCT ON (m.user_id, m.conversation_id) m.*
FROM memory AS m
WHERE m.status = 'completed'
ORDER BY m.user_id, m.conversation_id, m.end_sequence DESC, m.memory_id DESC;

-- "The user a thread id belongs to": its owner as recorded, else the per-conversation scope. Readers that
-- take a thread id alone (the observability queries, context_at_round, message_visibility) filter on
-- (conversation_user(id), id), so they read through keys that lead with user_id instead of scanning.
CREATE FUNCTION conversation_user(p_conversation_id text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path FROM CURRENT
AS $$
    SELECT COALESCE(
        (SELECT o.user_id FROM conversation_owners AS o WHERE o.conversation_id = p_conversation_id),
        'conversation:' || p_conversation_id
    )
$$;
