-- 0014_guards: per-tenant guards of scheduled summarization (cluster-summarization-pipeline.md) and the cost
-- ledger they read: every LLM call memory_agent makes, with its tokens and cost.
-- Tenant-wide rows (a tenant's last scheduler run, its monthly spend) carry user_id '' : no user has an empty
-- id (long_term.scope.check_id refuses it), and the tables stay keyed by user_id like every other one.
-- Times come from the caller's clock parameter, never now().

-- One row per model call: who it was for, why, which model, its tokens, and its cost priced at call time from
-- MEMORY_AGENT_LLM_PRICES (a model missing from the price table costs 0 and says priced = false; its tokens
-- are still counted). No user text: forgetting a user leaves the rows, so a tenant's spend never shrinks.
CREATE TABLE IF NOT EXISTS llm_calls (
    user_id       TEXT NOT NULL,
    tenant_id     TEXT NOT NULL,
    call_id       BIGINT GENERATED ALWAYS AS IDENTITY,
    purpose       TEXT NOT NULL CHECK (purpose IN
                      ('conversation_summary', 'cluster_summary', 'consolidation', 'batch_summary', 'app')),
    model         TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL CHECK (input_tokens >= 0),
    output_tokens INTEGER NOT NULL CHECK (output_tokens >= 0),
    cost          NUMERIC(18, 8) NOT NULL CHECK (cost >= 0),
    priced        BOOLEAN NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, call_id)
);

-- The weekly report reads a tenant's calls by time.
CREATE INDEX IF NOT EXISTS idx_llm_calls_tenant_created ON llm_calls (tenant_id, created_at);

-- A tenant's spend per calendar month (UTC) on memory_agent's own calls (not the app's: purpose 'app'),
-- kept by the statement that records the calls: the ceiling check is one primary-key read per round.
CREATE TABLE IF NOT EXISTS tenant_monthly_spend (
    user_id   TEXT NOT NULL DEFAULT '' CHECK (user_id = ''),
    tenant_id TEXT NOT NULL,
    month     DATE NOT NULL CHECK (extract(day FROM month) = 1),
    cost      NUMERIC(18, 8) NOT NULL DEFAULT 0 CHECK (cost >= 0),
    calls     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, tenant_id, month)
);

-- A tenant's last scheduler run: a run within the cooldown of the previous one does nothing (decided by a
-- conditional upsert, whatever the number of schedulers).
CREATE TABLE IF NOT EXISTS tenant_scheduler_runs (
    user_id   TEXT NOT NULL DEFAULT '' CHECK (user_id = ''),
    tenant_id TEXT NOT NULL,
    last_run  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, tenant_id)
);

-- What recall did besides its path: 'over_budget' when the tenant's monthly cost ceiling made it skip the
-- summaries and return raw items; null otherwise.
ALTER TABLE round_metrics
    ADD COLUMN IF NOT EXISTS recall_status TEXT CHECK (recall_status IN ('over_budget'));

ALTER TABLE llm_calls ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_monthly_spend ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_scheduler_runs ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS llm_calls_tenant ON llm_calls;
CREATE POLICY llm_calls_tenant ON llm_calls
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS tenant_monthly_spend_tenant ON tenant_monthly_spend;
CREATE POLICY tenant_monthly_spend_tenant ON tenant_monthly_spend
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS tenant_scheduler_runs_tenant ON tenant_scheduler_runs;
CREATE POLICY tenant_scheduler_runs_tenant ON tenant_scheduler_runs
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
