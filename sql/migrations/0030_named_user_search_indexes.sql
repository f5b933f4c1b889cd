-- 0030_named_user_search_indexes: recall's text-search indexes on messages hold the turns of named users only.
-- memory_agent: no-transaction
-- A conversation run without a user has its own scope ('conversation:<thread id>'), which recall never searches:
-- no caller can name it (schemas/keys.py), and a round without a user never recalls. Its messages were still
-- indexed three times at every round end (their trigrams, their 'simple' and their 'english' lexemes): measured
-- in the steady benchmark, about a third of end_round's own time. The indexes below leave those rows out. Recall's
-- reads of turns (sql/queries/recall.sql: user_turns; recall_dates.sql: in_span) carry the same condition, word
-- for word, so the planner proves that they may read them (a generic plan included, the user a parameter).
-- Built and dropped concurrently: rounds keep storing meanwhile, however many messages there are.

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_named_user_fts_english
    ON messages USING gin (user_id, fts_english) WHERE NOT starts_with(user_id, 'conversation:');

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_named_user_fts_simple
    ON messages USING gin (to_tsvector('simple'::regconfig, left(content, 100000)))
    WHERE NOT starts_with(user_id, 'conversation:');

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_messages_named_user_trgm
    ON messages USING gin ((substr(content, 1, 10000)) gin_trgm_ops) WHERE NOT starts_with(user_id, 'conversation:');

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_user_fts_english;

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_fts_simple_prefix;

DROP INDEX CONCURRENTLY IF EXISTS idx_messages_content_prefix_trgm;
