-- 0004_message_ids: the LangChain id of each stored message, so "already stored" is a fact, not a guess.
-- A round stores the messages of its graph state that are not stored yet; a message is "stored" when a row of
-- the conversation has its id and the same content (a reply that reuses an earlier id with new content is new).

ALTER TABLE messages ADD COLUMN IF NOT EXISTS message_id TEXT GENERATED ALWAYS AS (message -> 'data' ->> 'id') STORED;

CREATE INDEX IF NOT EXISTS idx_messages_conversation_message_id
    ON messages (conversation_id, message_id) WHERE message_id IS NOT NULL;

-- The newest memory row of a conversation (why a gap is long: summaries failing or lagging) without reading
-- every version of it.
CREATE INDEX IF NOT EXISTS idx_memory_conversation_memory_id ON memory (conversation_id, memory_id);
