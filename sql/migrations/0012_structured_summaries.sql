-- 0012_structured_summaries: a memory version's structured items beside its text.
-- `items` holds the five lists of MemorySummaryOutput (facts, preferences, decisions, todos, entities), each item
-- {key, content, importance, source_sequences, single_valued}, and `dropped` when the model gave invalid items
-- twice (the answer and its retry; the text was kept, those items not); NULL for versions written before this column and
-- for rows not completed. The long-term tier is written from it in the transaction that completes the version.
ALTER TABLE memory ADD COLUMN IF NOT EXISTS items JSONB;
