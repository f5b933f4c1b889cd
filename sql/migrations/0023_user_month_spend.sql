-- 0023_user_month_spend: the monthly spend is kept per user; a tenant's month is the sum of its rows.
-- Until now one row per tenant and month (user_id '') took every model call's cost: on Citus that row lives on one
-- shard, so every summary, written on its user's shard, committed on two nodes (two-phase commit) and every tenant's
-- summaries queued on one row lock. A summary now adds its cost to its own user's row, beside its memory version.
-- The tenant's row (user_id '') stays: it holds the spend recorded before this release, and reserve_budget locks it to
-- admit a tenant's concurrent callers one at a time.
ALTER TABLE tenant_monthly_spend DROP CONSTRAINT IF EXISTS tenant_monthly_spend_user_id_check;

-- The tenant's month, summed over its users.
CREATE INDEX IF NOT EXISTS idx_tenant_monthly_spend_tenant_month ON tenant_monthly_spend (tenant_id, month);
