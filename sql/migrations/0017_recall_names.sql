-- 0017_recall_names: a turn's full-text vector holds its speaker's name.
-- A chat message can carry a `name` (LangChain's `name`, the speaker in a group chat or a persona): it is text of
-- the message that recall should see ("What did Caroline say about…" finds Caroline's turns). Measured on the
-- LoCoMo development split, the speaker's name in the vector lifted evidence recall (docs/recall.md).
-- A generated column's expression cannot be changed in place before PostgreSQL 17: the column and its index are
-- made again (every turn's vector is recomputed once, here).
ALTER TABLE messages DROP COLUMN IF EXISTS fts_english;
ALTER TABLE messages ADD COLUMN fts_english tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, coalesce(message -> 'data' ->> 'name', '') || ' ' || content))
    STORED;
CREATE INDEX IF NOT EXISTS idx_messages_user_fts_english ON messages USING gin (user_id, fts_english);
