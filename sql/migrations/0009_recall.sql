-- 0009_recall: what recall at round start searches — full-text and trigram indexes over earlier turns and
-- long-term items, and the embeddings of items and cluster summaries (never of turns).

-- The items tables and the extensions (pg_trgm, btree_gist, vector when the server has it) are 0008_long_term's.

-- Provenance of a recalled item: its sources by item.
CREATE INDEX IF NOT EXISTS idx_item_sources_item ON item_sources (user_id, item_id);

-- The text-search configuration is a setting. The default's vectors are stored (ranking hundreds of matches
-- by recomputing to_tsvector cost ~25 µs a row: 100+ ms a recall); any other configuration ('simple' is the
-- seed's and has its expression index) is computed on the fly. A query names the configuration as a constant
-- after parameter binding, which is what lets the planner pick the column or match the expression.
ALTER TABLE messages ADD COLUMN IF NOT EXISTS fts_english tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED;
ALTER TABLE items ADD COLUMN IF NOT EXISTS fts_english tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED;
CREATE INDEX IF NOT EXISTS idx_messages_fts_english ON messages USING gin (fts_english);
CREATE INDEX IF NOT EXISTS idx_items_fts_english ON items USING gin (fts_english);
CREATE INDEX IF NOT EXISTS idx_messages_fts_simple ON messages USING gin (to_tsvector('simple'::regconfig, content));
CREATE INDEX IF NOT EXISTS idx_items_fts_simple ON items USING gin (to_tsvector('simple'::regconfig, content));

-- Trigrams: the fallback for short queries and for CJK text, which the text-search parsers keep as one token.
CREATE INDEX IF NOT EXISTS idx_messages_content_trgm ON messages USING gin (content gin_trgm_ops);
CREATE INDEX IF NOT EXISTS idx_items_content_trgm ON items USING gin (content gin_trgm_ops);

-- A CJK query is also matched by its character bigrams (strpos: two characters have no trigram, no index
-- serves them), read only from the rows that have CJK text: without these, a CJK query read all of a user's
-- rows (23 ms at 5,000 turns and 10,000 items with no CJK text at all). The ranges are recall.py's _CJK.
ALTER TABLE messages ADD COLUMN IF NOT EXISTS has_cjk boolean
    GENERATED ALWAYS AS (content ~ '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]') STORED;
ALTER TABLE items ADD COLUMN IF NOT EXISTS has_cjk boolean
    GENERATED ALWAYS AS (content ~ '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]') STORED;
CREATE INDEX IF NOT EXISTS idx_messages_user_cjk ON messages (user_id, tenant_id) WHERE has_cjk;
CREATE INDEX IF NOT EXISTS idx_items_user_cjk ON items (user_id, tenant_id) WHERE has_cjk AND upper_inf(valid_during);

-- The latest turns of a user (the recent fallback: their most recently active other conversation) without
-- reading every turn of theirs.
CREATE INDEX IF NOT EXISTS idx_messages_user_created ON messages (user_id, tenant_id, created_at DESC, sequence_number DESC);

-- Embeddings only when pgvector is installed on the server: without it recall runs without the vector path.
-- item_id takes the type items.item_id has, whichever migration created items.
DO $$
DECLARE
    item_id_type TEXT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        RAISE NOTICE 'pgvector is not installed: recall runs without vectors';
        RETURN;
    END IF;
    SELECT format_type(a.atttypid, a.atttypmod) INTO item_id_type
    FROM pg_attribute AS a
    WHERE a.attrelid = 'items'::regclass AND a.attname = 'item_id';
    -- The dimension stays open: an embedder is chosen by configuration, and `model` says which one wrote a row
    -- (a vector of another model is never compared with the query's).
    EXECUTE format(
        'CREATE TABLE IF NOT EXISTS item_embeddings ('
        '  user_id TEXT NOT NULL,'
        '  tenant_id TEXT NOT NULL,'
        '  item_id %s NOT NULL,'
        '  model TEXT NOT NULL,'
        '  embedding vector NOT NULL,'
        '  PRIMARY KEY (user_id, item_id),'
        '  FOREIGN KEY (user_id, item_id) REFERENCES items (user_id, item_id) ON DELETE CASCADE)',
        item_id_type);
    -- Per tenant like items (0008): a role that does not own the table sees the tenant it named, nothing else.
    ALTER TABLE item_embeddings ENABLE ROW LEVEL SECURITY;
    DROP POLICY IF EXISTS item_embeddings_tenant ON item_embeddings;
    CREATE POLICY item_embeddings_tenant ON item_embeddings
        USING (tenant_id = current_setting('memory_agent.tenant_id', true));
    -- HNSW needs a fixed dimension: one partial index for the offline embedder's 256. A user's items are few
    -- enough that the planner scans them exactly after the user_id key; the index serves unfiltered reads.
    CREATE INDEX IF NOT EXISTS idx_item_embeddings_hnsw_256 ON item_embeddings
        USING hnsw ((embedding::vector(256)) vector_cosine_ops) WHERE vector_dims(embedding) = 256;
END
$$;
