-- 0002_round_metrics: one append-only row per round (what the model was given and how the round went).

CREATE TABLE IF NOT EXISTS round_metrics (
    id                BIGSERIAL PRIMARY KEY,
    conversation_id   TEXT NOT NULL,             -- no foreign key: a failed first round has no conversation row
    round_number      INTEGER,                   -- null when the round failed before it was stored
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    first_sequence    INTEGER,                   -- the round's own messages
    last_sequence     INTEGER,
    memory_id         INTEGER,                   -- memory version served; null on raw fallback
    memory_end_sequence INTEGER,
    gap_start_sequence INTEGER,                  -- stored messages given to the model after the memory
    gap_end_sequence  INTEGER,
    gap_size          INTEGER NOT NULL DEFAULT 0,
    context_messages  INTEGER NOT NULL DEFAULT 0, -- messages the wrapped graph received
    context_tokens    INTEGER,                   -- estimated (count_tokens_approximately)
    truncated         BOOLEAN NOT NULL DEFAULT false,
    truncation        JSONB,                     -- what the token budget cut, when it cut
    retrieval_path    TEXT NOT NULL CHECK (retrieval_path IN ('memory+gap', 'raw')),
    latency_load_ms   DOUBLE PRECISION,
    latency_round_ms  DOUBLE PRECISION,          -- round start to round persisted
    summary_triggered BOOLEAN NOT NULL DEFAULT false,
    trigger_outcome   TEXT,                      -- started | below_threshold | already_processing | no_new_messages
    triggered_memory_id INTEGER,
    error_stage       TEXT,                      -- null | load | graph | save
    error             TEXT
);

CREATE INDEX IF NOT EXISTS idx_round_metrics_conversation_round
    ON round_metrics (conversation_id, round_number);
CREATE INDEX IF NOT EXISTS idx_round_metrics_created_at
    ON round_metrics (created_at);
