-- 0021_derived_lineage: what each consolidation note and batch summary was made from, so that forgetting a source
-- (forget_item, delete_conversation) finds every note and batch summary holding its text and drops it.
-- A null array: a row written before lineage was recorded; forgetting treats it as derived from every source of
-- its user (dropped by any forget of that user, and re-made by the next run).
-- consolidation_notes: the items and memory versions a daily note read, the notes a weekly or monthly note read,
-- and (carried up from its own sources) every item and conversation any of them came from.
ALTER TABLE consolidation_notes
    ADD COLUMN IF NOT EXISTS source_item_ids         BIGINT[],
    ADD COLUMN IF NOT EXISTS source_memory_ids       BIGINT[],
    ADD COLUMN IF NOT EXISTS source_note_ids         BIGINT[],
    ADD COLUMN IF NOT EXISTS source_conversation_ids TEXT[];

-- batch_summaries: the conversations its items came from (summarized_ids already names the items; after the TTL
-- pass erases them, this is what still ties the summary to a conversation).
ALTER TABLE batch_summaries ADD COLUMN IF NOT EXISTS source_conversation_ids TEXT[];

CREATE INDEX IF NOT EXISTS idx_consolidation_notes_source_items
    ON consolidation_notes USING gin (source_item_ids);
CREATE INDEX IF NOT EXISTS idx_consolidation_notes_source_conversations
    ON consolidation_notes USING gin (source_conversation_ids);
CREATE INDEX IF NOT EXISTS idx_batch_summaries_source_conversations
    ON batch_summaries USING gin (source_conversation_ids);
