-- 0007_recall_metrics: round_metrics records recall at round start (the evolution plan's V1.1-1 fields).
-- retrieval_path keeps its meaning (what the conversation memory served: memory+gap | raw); what recall
-- served is recall_path, null when the round did not recall (no user, recall off, or recall failed).
-- `query` is a copy of the user's message: it goes with the round's row when the conversation is deleted or
-- forgotten (delete_conversation, long_term.forget), like every other row of the conversation.

ALTER TABLE round_metrics
    ADD COLUMN query                TEXT,              -- the text recall searched (the round's newest user message)
    ADD COLUMN fts_hits             INTEGER,
    ADD COLUMN trgm_hits            INTEGER,
    ADD COLUMN used_fallback        BOOLEAN,           -- trigrams, vectors or the latest turns had to run
    ADD COLUMN recall_path          TEXT CHECK (recall_path IN ('fts', 'trgm', 'vector', 'window', 'summaries_only')),
    ADD COLUMN context_items        INTEGER,           -- hits in the recalled block
    ADD COLUMN estimated_tokens     INTEGER,           -- of the recalled block (count_tokens_approximately)
    ADD COLUMN recall_truncated     BOOLEAN,           -- a recall guardrail (tokens, turns, turn length) cut
    ADD COLUMN latency_retrieval_ms DOUBLE PRECISION,  -- recall, run beside the load of memory + gap
    ADD COLUMN latency_llm_ms       DOUBLE PRECISION;  -- round start to round end: the wrapped graph's time

COMMENT ON COLUMN round_metrics.error_stage IS
    'null | load | graph | save: the round failed there; retrieval: recall failed and the round ran without it';
