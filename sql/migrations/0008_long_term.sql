-- 0008_long_term: the per-user long-term tier — items with validity over time, their lineage, cluster summaries.
-- Every row carries tenant_id and user_id; every key leads with user_id (the distribution column when sharded).
-- Times come from the writer's clock parameter, never now(): the column defaults below are for hand-written rows.

-- btree_gist: text equality inside a GiST index (the WITHOUT OVERLAPS key). pg_trgm: trigram recall.
-- Installed in `public` when the role may, which every memory_agent connection has on its search_path: in the
-- migrated schema, a second memory_agent schema of the database would not find pg_trgm's functions, and
-- dropping the first schema would drop the extension under the second one's indexes.
DO $$
DECLARE
    wanted text;
BEGIN
    FOREACH wanted IN ARRAY ARRAY['btree_gist', 'pg_trgm'] LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_extension WHERE extname = wanted);
        BEGIN
            EXECUTE format('CREATE EXTENSION %I SCHEMA public', wanted);
        EXCEPTION WHEN insufficient_privilege OR invalid_schema_name THEN
            EXECUTE format('CREATE EXTENSION %I', wanted);
        END;
    END LOOP;
END
$$;

-- pgvector stays optional: created when the server ships it and the role may create it, skipped otherwise.
-- Embeddings live in a table of the recall migration (0009), keyed (user_id, item_id) and referencing items
-- ON DELETE CASCADE, so forgetting an item forgets its vector in the same statement.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')
       AND NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        BEGIN
            BEGIN
                CREATE EXTENSION vector SCHEMA public;
            EXCEPTION WHEN invalid_schema_name THEN
                CREATE EXTENSION vector;
            END;
        EXCEPTION WHEN insufficient_privilege OR feature_not_supported THEN
            RAISE NOTICE 'memory_agent: extension vector not created (%); vector recall stays off', SQLERRM;
        END;
    END IF;
END
$$;

-- One row per version of an item. A version is current while its validity is open (upper_inf(valid_during));
-- a new value of a single-valued key closes the current version (valid_to) and opens another; nothing in the
-- write path deletes a version — only forgetting does.
-- value_slot: '' for single-valued items (one current value per key), md5(content_norm) for multi-valued
-- ones (one current row per distinct content), 'summary' for a cluster summary (one per cluster).
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
    content_norm    TEXT NOT NULL,                 -- memory_agent.long_term.items.normalize_content(content)
    importance      REAL NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
    confidence      REAL NOT NULL DEFAULT 1 CHECK (confidence BETWEEN 0 AND 1),
    valid_during    TSTZRANGE NOT NULL,
    valid_from      TIMESTAMPTZ GENERATED ALWAYS AS (lower(valid_during)) STORED,
    valid_to        TIMESTAMPTZ GENERATED ALWAYS AS (upper(valid_during)) STORED,  -- null while current
    is_summary      BOOLEAN NOT NULL DEFAULT false,
    source_item_ids BIGINT[] NOT NULL DEFAULT '{}',  -- a summary's members, ascending
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),  -- last restatement, or a summary's last refresh
    PRIMARY KEY (user_id, item_id),
    CHECK (is_summary = (value_slot = 'summary')),
    CHECK (is_summary OR source_item_ids = '{}'),
    CHECK (NOT lower_inf(valid_during)),
    -- No duplicates and no two current values, decided here: a concurrent writer of an overlapping version
    -- blocks until the first commits, then fails with 23P01 and retries (memory_agent.long_term.writer).
    CONSTRAINT items_one_version_at_a_time UNIQUE
        (user_id, tenant_id, project, environment, item_type, key, value_slot, valid_during WITHOUT OVERLAPS)
);

-- Current rows of a key or a cluster, read on every write and by list_items without as_of.
CREATE INDEX IF NOT EXISTS idx_items_current
    ON items (user_id, tenant_id, project, environment, item_type, key, value_slot)
    WHERE upper_inf(valid_during);

-- Where each item came from. A row per cited message (sequence_number), or one with a null sequence when the
-- item cites none; conversation_id and memory_id are null for items written outside a conversation (the
-- LangGraph store). An item whose every lineage row is erased is erased with it (long_term.forget).
CREATE TABLE IF NOT EXISTS item_sources (
    user_id         TEXT NOT NULL,
    tenant_id       TEXT NOT NULL,
    source_id       BIGINT GENERATED ALWAYS AS IDENTITY,
    item_id         BIGINT NOT NULL,
    conversation_id TEXT,
    memory_id       INTEGER,                       -- the memory version whose summary stated the item
    sequence_number INTEGER,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, source_id),
    FOREIGN KEY (user_id, item_id) REFERENCES items (user_id, item_id) ON DELETE CASCADE,
    -- Restating an item from the same message of the same memory version adds nothing.
    CONSTRAINT item_sources_once UNIQUE NULLS NOT DISTINCT
        (user_id, item_id, conversation_id, memory_id, sequence_number)
);

CREATE INDEX IF NOT EXISTS idx_item_sources_conversation ON item_sources (user_id, conversation_id);

-- Row-level security per tenant. Policies apply to roles that do not own the tables: the owner (the role that
-- ran this migration) bypasses them unless the table is FORCEd, so a deployment that wants the database to
-- enforce tenants runs the application as a separate role granted SELECT/INSERT/UPDATE/DELETE on these tables,
-- and every transaction names its tenant: SET LOCAL memory_agent.tenant_id = '...' (long_term.tenancy). Such a
-- role sees no row of a tenant it did not name, and none at all when it named none.
ALTER TABLE items ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_sources ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS items_tenant ON items;
CREATE POLICY items_tenant ON items
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS item_sources_tenant ON item_sources;
CREATE POLICY item_sources_tenant ON item_sources
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
