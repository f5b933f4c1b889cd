-- 0010_consolidation: scheduled consolidation — daily notes, their compaction, weekly and monthly rollups, batch
-- summaries of old long-term items, and the schedule state that tells a run what is due.
-- Keyed by user_id like every table; times come from the scheduler's clock parameter, never now().

-- One note per (tenant, user, period, period_start): a re-run or a retried job writes nothing twice
-- (INSERT ... ON CONFLICT DO NOTHING). Dailies are compacted after retain_days (content replaced by the
-- consolidated text, compacted_at set); weekly and monthly notes are kept forever.
CREATE TABLE IF NOT EXISTS consolidation_notes (
    user_id            TEXT NOT NULL,
    tenant_id          TEXT NOT NULL,
    note_id            BIGINT GENERATED ALWAYS AS IDENTITY,
    period             TEXT NOT NULL CHECK (period IN ('daily', 'weekly', 'monthly')),
    period_start       DATE NOT NULL,
    period_end         DATE NOT NULL,                 -- last day covered, inclusive
    content            TEXT NOT NULL,                 -- dailies: the day's raw material until compacted
    consolidated       TEXT NOT NULL,                 -- the model's condensed text (all distinct facts)
    insights           JSONB NOT NULL DEFAULT '[]',   -- [{"text", "importance" 0-1}], most important first
    key_insights       TEXT[] NOT NULL DEFAULT '{}',  -- the top insights, for keyword search and recall
    key_insights_text  TEXT NOT NULL DEFAULT '',      -- key_insights joined: what the full-text index reads
    notes_consolidated INTEGER NOT NULL CHECK (notes_consolidated >= 0),
    model              TEXT NOT NULL,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    compacted_at       TIMESTAMPTZ,
    created_at         TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, note_id),
    CHECK (period_end >= period_start),
    CHECK (compacted_at IS NULL OR period = 'daily'),
    CONSTRAINT consolidation_notes_once UNIQUE (user_id, tenant_id, period, period_start)
);

CREATE INDEX IF NOT EXISTS idx_consolidation_notes_key_insights
    ON consolidation_notes USING gin (key_insights);
CREATE INDEX IF NOT EXISTS idx_consolidation_notes_key_insights_text
    ON consolidation_notes USING gin (to_tsvector('simple', key_insights_text));

-- What each scheduled job of a user has done and when it is due next. `covered_until`: the last day whose
-- nightly work is written (the next run starts the day after: a tick missed while no worker ran is caught up).
CREATE TABLE IF NOT EXISTS consolidation_schedules (
    user_id       TEXT NOT NULL,
    tenant_id     TEXT NOT NULL,
    job           TEXT NOT NULL CHECK (job IN ('nightly', 'batch_summaries')),
    schedule      TEXT NOT NULL CHECK (schedule IN ('daily', 'weekly', 'next_run')),
    interval_days INTEGER NOT NULL CHECK (interval_days >= 1),
    covered_until DATE,
    last_run      TIMESTAMPTZ,
    next_run      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, tenant_id, job)
);

-- A summary of a batch of long-term items (oldest first, at most max_memories_per_batch). The summarized ids
-- stay recorded after the TTL pass deletes the originals: the lineage of what the summary stands for.
-- Summaries are never deleted by the TTL pass.
CREATE TABLE IF NOT EXISTS batch_summaries (
    user_id          TEXT NOT NULL,
    tenant_id        TEXT NOT NULL,
    summary_id       BIGINT GENERATED ALWAYS AS IDENTITY,
    project          TEXT NOT NULL DEFAULT '',
    environment      TEXT NOT NULL DEFAULT '',
    content          TEXT NOT NULL CHECK (content <> ''),
    first_item_id    BIGINT NOT NULL,                 -- the batch's oldest item: the same batch twice is one row
    summarized_ids   BIGINT[] NOT NULL CHECK (cardinality(summarized_ids) > 0),
    summarized_from  TIMESTAMPTZ NOT NULL,
    summarized_until TIMESTAMPTZ NOT NULL,            -- the newest summarized item's created_at
    model            TEXT NOT NULL,
    input_tokens     INTEGER NOT NULL DEFAULT 0,
    output_tokens    INTEGER NOT NULL DEFAULT 0,
    created_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, summary_id),
    CONSTRAINT batch_summaries_once UNIQUE (user_id, tenant_id, first_item_id)
);

CREATE INDEX IF NOT EXISTS idx_batch_summaries_ids ON batch_summaries USING gin (summarized_ids);

ALTER TABLE consolidation_notes ENABLE ROW LEVEL SECURITY;
ALTER TABLE consolidation_schedules ENABLE ROW LEVEL SECURITY;
ALTER TABLE batch_summaries ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS consolidation_notes_tenant ON consolidation_notes;
CREATE POLICY consolidation_notes_tenant ON consolidation_notes
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS consolidation_schedules_tenant ON consolidation_schedules;
CREATE POLICY consolidation_schedules_tenant ON consolidation_schedules
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS batch_summaries_tenant ON batch_summaries;
CREATE POLICY batch_summaries_tenant ON batch_summaries
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
