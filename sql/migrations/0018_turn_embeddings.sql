-- 0018_turn_embeddings: vectors of turns (user and assistant messages), beside those of items and summaries.
-- Measured on the LoCoMo development split (docs/recall.md): items cover a small part of what users said (the
-- extractor made 86 items of 5,882 turns), so vectors of items alone added nothing; vectors of the turns fused with
-- full text raised evidence recall. They are written by the background job after a summary (never in the round),
-- one row per turn for the configured embedder's model; a conversation's deletion takes them with its turns.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        RAISE NOTICE 'pgvector is not installed: recall runs without vectors';
        RETURN;
    END IF;
    CREATE TABLE IF NOT EXISTS message_embeddings (
        user_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        sequence_number INTEGER NOT NULL,
        model TEXT NOT NULL,
        embedding vector NOT NULL,
        PRIMARY KEY (user_id, conversation_id, sequence_number),
        FOREIGN KEY (user_id, conversation_id, sequence_number)
            REFERENCES messages (user_id, conversation_id, sequence_number) ON DELETE CASCADE);
    -- Read per user and model: an exact scan of the user's vectors (HNSW cannot filter by user before it ranks).
    CREATE INDEX IF NOT EXISTS idx_message_embeddings_user_model ON message_embeddings (user_id, tenant_id, model);
    -- Per tenant like items (0008): a role that does not own the table sees the tenant it named, nothing else.
    ALTER TABLE message_embeddings ENABLE ROW LEVEL SECURITY;
    DROP POLICY IF EXISTS message_embeddings_tenant ON message_embeddings;
    CREATE POLICY message_embeddings_tenant ON message_embeddings
        USING (tenant_id = current_setting('memory_agent.tenant_id', true));
END
$$;
