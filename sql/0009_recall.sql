-- 0009_recall: what recall at round start searches — full-text and trigram indexes over earlier turns and
-- long-term items, and the embeddings of items and cluster summaries (never of turns).

-- Extensions go to public, which every memory_agent schema has on its search_path: installed in the first
-- schema migrated, their operator classes would be invisible to a second memory_agent schema of the database.
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public;

-- Long-term items are owned by 0008_long_term. This copy of its two tables (same columns and keys, without
-- its indexes and row-level security) only exists so that recall can be built and tested on its own: every
-- statement is IF NOT EXISTS, so after 0008 it does nothing, and it can be dropped from this file then.
CREATE TABLE IF NOT EXISTS items (
    user_id         TEXT NOT NULL,
    tenant_id       TEXT NOT NULL,
    item_id         BIGINT GENERATED ALWAYS AS IDENTITY,
    project         TEXT NOT NULL DEFAULT '',
    environment     TEXT NOT NULL DEFAULT '',
    item_type       TEXT NOT NULL CHECK (item_type IN ('fact', 'preference', 'decision', 'todo', 'entity')),
    key             TEXT NOT NULL CHECK (key <> ''),
    value_slot      TEXT NOT NULL,
    content         TEXT NOT NULL CHECK (content <> ''),
    content_norm    TEXT NOT NULL,
    importance      REAL NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
    confidence      REAL NOT NULL DEFAULT 1 CHECK (confidence BETWEEN 0 AND 1),
    valid_during    TSTZRANGE NOT NULL,
    valid_from      TIMESTAMPTZ GENERATED ALWAYS AS (lower(valid_during)) STORED,
    valid_to        TIMESTAMPTZ GENERATED ALWAYS AS (upper(valid_during)) STORED,
    is_summary      BOOLEAN NOT NULL DEFAULT false,
    source_item_ids BIGINT[] NOT NULL DEFAULT '{}',
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, item_id),
    CHECK (is_summary = (value_slot = 'summary')),
    CHECK (is_summary OR source_item_ids = '{}'),
    CHECK (NOT lower_inf(valid_during)),
    CONSTRAINT items_one_version_at_a_time UNIQUE
        (user_id, tenant_id, project, environment, item_type, key, value_slot, valid_during WITHOUT OVERLAPS)
);

CREATE TABLE IF NOT EXISTS item_sources (
    user_id         TEXT NOT NULL,
    tenant_id       TEXT NOT NULL,
    source_id       BIGINT GENERATED ALWAYS AS IDENTITY,
    item_id         BIGINT NOT NULL,
    conversation_id TEXT,
    memory_id       INTEGER,
    sequence_number INTEGER,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, source_id),
    FOREIGN KEY (user_id, item_id) REFERENCES items (user_id, item_id) ON DELETE CASCADE,
    CONSTRAINT item_sources_once UNIQUE NULLS NOT DISTINCT
        (user_id, item_id, conversation_id, memory_id, sequence_number)
);

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
    CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;
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
