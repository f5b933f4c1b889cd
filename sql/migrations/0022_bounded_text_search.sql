-- 0022_bounded_text_search: a full-text vector is made from the first 100,000 characters of its text.
-- PostgreSQL refuses a tsvector whose lexemes pass 1 MB ("string is too long for tsvector"): a round with ~750 KB
-- of distinct words failed at every attempt, the generated column or the expression index refusing the insert.
-- 100,000 characters are at most 400 kB of UTF-8 (~600 kB of lexemes where lower-casing lengthens a letter), far
-- below the limit whatever the text. The text itself is stored whole; past the prefix it is found by trigrams only.
-- Recall's computed vectors (sql/recall.sql), the store's search (sql/store.sql) and the notes' search
-- (sql/consolidation.sql) read the same prefix, so the expression indexes below still serve them.
ALTER TABLE messages ALTER COLUMN fts_english
    SET EXPRESSION AS (to_tsvector('english'::regconfig,
                                   left(coalesce(message -> 'data' ->> 'name', '') || ' ' || content, 100000)));
ALTER TABLE items ALTER COLUMN fts_english
    SET EXPRESSION AS (to_tsvector('english'::regconfig, left(content, 100000)));
ALTER TABLE consolidation_notes ALTER COLUMN key_insights_fts_english
    SET EXPRESSION AS (to_tsvector('english'::regconfig, left(key_insights_text, 100000)));
ALTER TABLE batch_summaries ALTER COLUMN fts_english
    SET EXPRESSION AS (to_tsvector('english'::regconfig, left(content, 100000)));

DROP INDEX IF EXISTS idx_messages_fts_simple;
DROP INDEX IF EXISTS idx_items_fts_simple;
DROP INDEX IF EXISTS idx_consolidation_notes_key_insights_text;
CREATE INDEX IF NOT EXISTS idx_messages_fts_simple_prefix
    ON messages USING gin (to_tsvector('simple'::regconfig, left(content, 100000)));
CREATE INDEX IF NOT EXISTS idx_items_fts_simple_prefix
    ON items USING gin (to_tsvector('simple'::regconfig, left(content, 100000)));
CREATE INDEX IF NOT EXISTS idx_consolidation_notes_key_insights_prefix
    ON consolidation_notes USING gin (to_tsvector('simple'::regconfig, left(key_insights_text, 100000)));
