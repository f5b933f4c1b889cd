-- 0001_init: conversations, messages and the memory version chain.
-- Applied with search_path set to the memory_agent schema (setting `db_schema`).

CREATE TABLE IF NOT EXISTS conversations (
    conversation_id TEXT PRIMARY KEY,              -- LangGraph thread_id, free text
    next_sequence   INTEGER NOT NULL DEFAULT 0,    -- sequence_number the next stored message gets
    round_count     INTEGER NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS messages (
    conversation_id TEXT NOT NULL REFERENCES conversations (conversation_id) ON DELETE CASCADE,
    sequence_number INTEGER NOT NULL,              -- 0-based, gap-free within a conversation
    round_number    INTEGER NOT NULL,              -- 1-based; a round = user message + every AI/tool message it produced
    role            TEXT NOT NULL,                 -- user | assistant | tool | system
    content         TEXT NOT NULL,                 -- plain text of the message, for SQL readers
    message         JSONB NOT NULL,                -- the full LangChain message (message_to_dict)
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (conversation_id, sequence_number)
);

CREATE INDEX IF NOT EXISTS idx_messages_conversation_round
    ON messages (conversation_id, round_number);

CREATE TABLE IF NOT EXISTS memory (
    memory_id          SERIAL PRIMARY KEY,
    conversation_id    TEXT NOT NULL REFERENCES conversations (conversation_id) ON DELETE CASCADE,
    memory_text        TEXT NOT NULL DEFAULT '',
    start_sequence     INTEGER NOT NULL,           -- first message sequence in window
    end_sequence       INTEGER NOT NULL,           -- last message sequence in window
    base_memory_id     INTEGER REFERENCES memory (memory_id),  -- previous memory this was based on
    status             VARCHAR(20) NOT NULL DEFAULT 'completed'
                       CHECK (status IN ('processing', 'completed', 'failed')),
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    generation_time_ms INTEGER DEFAULT NULL,       -- LLM call duration
    -- observability
    error              TEXT,                       -- why a row is 'failed'
    model_name         TEXT,
    input_tokens       INTEGER,
    output_tokens      INTEGER,
    summarized_start   INTEGER,                    -- sequence range actually sent to the model
    summarized_end     INTEGER,
    attempts           INTEGER NOT NULL DEFAULT 0,
    started_at         TIMESTAMPTZ,                -- when a summarizer last picked the row up
    finished_at        TIMESTAMPTZ,
    CHECK (start_sequence <= end_sequence)
);

-- Index for getting most recent COMPLETED memory
CREATE INDEX IF NOT EXISTS idx_memory_conversation_status
    ON memory (conversation_id, status, end_sequence DESC);

-- At most one summarization in flight per conversation, whatever number of processes share the database.
CREATE UNIQUE INDEX IF NOT EXISTS idx_memory_one_processing
    ON memory (conversation_id) WHERE status = 'processing';
