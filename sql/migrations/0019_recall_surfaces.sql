-- 0019_recall_surfaces: batch summaries are recalled like every other memory, and a round keeps the recalled
-- block the model was given.

-- Batch summaries (0010) are searched by recall (sql/recall.sql) as summaries whose provenance is the items they
-- stand for: after the retention pass forgets the originals they are what is left of them. The 'english'
-- vectors are stored and indexed with the user, as for turns, items and key insights; CJK text is matched by
-- its bigrams from the rows that have it.
ALTER TABLE batch_summaries ADD COLUMN IF NOT EXISTS fts_english tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED;
ALTER TABLE batch_summaries ADD COLUMN IF NOT EXISTS has_cjk boolean
    GENERATED ALWAYS AS (content ~ '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]') STORED;
CREATE INDEX IF NOT EXISTS idx_batch_summaries_user_fts_english
    ON batch_summaries USING gin (user_id, fts_english);
CREATE INDEX IF NOT EXISTS idx_batch_summaries_content_trgm ON batch_summaries USING gin (content gin_trgm_ops);

-- What the model was given from long-term memory at round start, written with the round's metrics row (no
-- statement of its own): the block as injected and, per hit, its provenance (kind, score, paths, the
-- conversation and sequence of a turn, item ids, source item ids, a note or batch summary, the source turns).
-- The block holds text of the user's other conversations and items: forgetting one of them clears the blocks
-- that quoted it (sql/long_term.sql), and the round's row goes with its own conversation.
ALTER TABLE round_metrics
    ADD COLUMN IF NOT EXISTS recall_block TEXT,
    ADD COLUMN IF NOT EXISTS recall_hits  JSONB;
