-- 0015_recall_user_indexes: recall's full-text matches read through one index that holds the user too, and
-- recall's statement runs on a generic plan (prepared once per connection).

-- btree_gin lets a GIN index carry user_id beside the tsvector, so `user_id = $1 AND fts @@ q` is answered by
-- one index scan. Before, the planner either read every matching row of every user (then filtered) or ANDed the
-- text match with a bitmap of all the user's 10,000 items (~1 ms at 10,000 items per user, measured).
-- Installed in `public` when the role may, as 0008 does for pg_trgm and btree_gist (btree_gin is trusted).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'btree_gin') THEN
        BEGIN
            CREATE EXTENSION btree_gin SCHEMA public;
        EXCEPTION WHEN insufficient_privilege OR invalid_schema_name THEN
            CREATE EXTENSION btree_gin;
        END;
    END IF;
END
$$;

CREATE INDEX IF NOT EXISTS idx_messages_user_fts_english ON messages USING gin (user_id, fts_english);
CREATE INDEX IF NOT EXISTS idx_items_user_fts_english ON items USING gin (user_id, fts_english);
-- The user-less indexes of 0009 served only recall; every read of them is now one of the indexes above.
DROP INDEX IF EXISTS idx_messages_fts_english;
DROP INDEX IF EXISTS idx_items_fts_english;

-- A generic plan cannot prove `upper_inf(valid_during)` from recall's "current, or valid at as_of" condition, so
-- 0009's partial index on CJK items (current ones only) is never chosen: a CJK query then read every item of the
-- user (3.6 ms at 10,000 items). This one holds every version with CJK text; validity is checked on the rows.
CREATE INDEX IF NOT EXISTS idx_items_user_cjk_all ON items (user_id, tenant_id) WHERE has_cjk;
DROP INDEX IF EXISTS idx_items_user_cjk;

-- Key insights of weekly and monthly consolidation notes are recalled (sql/recall.sql) with the user's
-- configured text search: 'english' vectors are stored like those of turns and items, indexed with the user.
ALTER TABLE consolidation_notes ADD COLUMN IF NOT EXISTS key_insights_fts_english tsvector
    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, key_insights_text)) STORED;
CREATE INDEX IF NOT EXISTS idx_consolidation_notes_user_insights_english
    ON consolidation_notes USING gin (user_id, key_insights_fts_english) WHERE period IN ('weekly', 'monthly');
