-- 0009_recall: what recall at round start searches — full-text and trigram indexes over earlier turns and
-- long-term items, and the embeddings of items and cluster summaries (never of turns).

CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Long-term items are owned by 0008_long_term. This minimal copy (same column names) only exists so that
-- recall can be built and tested on its own: every statement is IF NOT EXISTS, so after 0008 it does nothing.
CREATE TABLE IF NOT EXISTS items (
    user_id         TEXT NOT NULL,
    tenant_id       TEXT NOT NULL,
    item_id         BIGINT GENERATED ALWAYS AS IDENTITY,
    item_type       TEXT NOT NULL,
    key             TEXT NOT NULL,
    content         TEXT NOT NULL,
    importance      REAL NOT NULL DEFAULT 0.5,
    valid_during    TSTZRANGE NOT NULL,
    is_summary      BOOLEAN NOT NULL DEFAULT false,
    source_item_ids BIGINT[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (user_id, item_id)
);

CREATE TABLE IF NOT EXISTS item_sources (
    user_id         TEXT NOT NULL,
    item_id         BIGINT NOT NULL,
    conversation_id TEXT NOT NULL,
    memory_id       INTEGER,
    sequence_number INTEGER NOT NULL,
    PRIMARY KEY (user_id, item_id, conversation_id, sequence_number),
    FOREIGN KEY (user_id, item_id) REFERENCES items (user_id, item_id) ON DELETE CASCADE
);

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

-- A user's current items, read on every recall.
CREATE INDEX IF NOT EXISTS idx_items_user_current ON items (user_id, tenant_id) WHERE upper_inf(valid_during);

-- Embeddings only when pgvector is installed on the server: without it recall runs without the vector path.
-- item_id takes the type items.item_id has, whichever migration created items.
DO $$
DECLARE
    item_id_type TEXT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        RAISE NOTICE 'pgvector is not available: recall runs without vectors';
        RETURN;
    END IF;
    CREATE EXTENSION IF NOT EXISTS vector;
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
    -- HNSW needs a fixed dimension: one partial index for the offline embedder's 256. A user's items are few
    -- enough that the planner scans them exactly after the user_id key; the index serves unfiltered reads.
    CREATE INDEX IF NOT EXISTS idx_item_embeddings_hnsw_256 ON item_embeddings
        USING hnsw ((embedding::vector(256)) vector_cosine_ops) WHERE vector_dims(embedding) = 256;
END
$$;
