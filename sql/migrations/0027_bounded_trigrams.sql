-- 0027_bounded_trigrams: recall's trigram fallback matches the first 10,000 characters of a text.
-- Trigram matching costs each candidate's length: the GIN index finds the candidates, and each one's word
-- similarity is then computed over its text. With whole texts indexed and matched, a user who had stored a 50 MB
-- and a 4 MB message waited 71-124 s for every recall whose full-text search found fewer than its minimum (0.03-
-- 0.12 s when full text found enough), whatever the query. Matched by their first 10,000 characters (~2.5 ms of
-- word similarity; `substr` reads no more than that of a stored text), such turns cost what ordinary ones do.
-- Past that prefix a text is found by full text (its first 100,000 characters, 0022) and by its vector.
-- The indexes below hold the prefix only (sql/queries/recall.sql matches the same expression); the whole-text
-- ones of 0009 and 0019 served recall alone.
CREATE INDEX IF NOT EXISTS idx_messages_content_prefix_trgm
    ON messages USING gin ((substr(content, 1, 10000)) gin_trgm_ops);
CREATE INDEX IF NOT EXISTS idx_items_content_prefix_trgm
    ON items USING gin ((substr(content, 1, 10000)) gin_trgm_ops);
CREATE INDEX IF NOT EXISTS idx_batch_summaries_content_prefix_trgm
    ON batch_summaries USING gin ((substr(content, 1, 10000)) gin_trgm_ops);
DROP INDEX IF EXISTS idx_messages_content_trgm;
DROP INDEX IF EXISTS idx_items_content_trgm;
DROP INDEX IF EXISTS idx_batch_summaries_content_trgm;
