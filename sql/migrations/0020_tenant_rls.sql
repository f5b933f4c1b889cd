-- 0020_tenant_rls: row-level security on every table that holds a tenant's data, and the cost ceiling's
-- reservations.
-- 0008, 0009, 0010 and 0014 gave the long-term tier, the consolidation tables and the guards a policy per tenant;
-- the conversation tier had none, so a role bound by the policies still read every tenant's messages, memory,
-- conversations and round metrics. Same rule here: a role that does not own the tables sees and writes the rows of
-- the tenant its transaction names (memory_agent.tenant_id) and nothing else; the owner bypasses the policies.
-- The views read the tables as the querying role (security_invoker, sql/definitions), so the policies hold
-- through them too. docs/privacy.md ("Row-level security") describes the setup.

-- api_keys: a key's tenant is read before any tenant is known, through api_key_tenant() (sql/definitions, SECURITY
-- DEFINER, one hash in, one tenant out); every other read or write of the keys is the tenant's own.
-- budget_reservations (below) gets the same policy.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['conversations', 'conversation_owners', 'messages', 'memory', 'round_metrics',
                             'round_leases', 'api_keys']
    LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('DROP POLICY IF EXISTS %I ON %I', t || '_tenant', t);
        EXECUTE format('CREATE POLICY %I ON %I USING (tenant_id = current_setting(%L, true))',
                       t || '_tenant', t, 'memory_agent.tenant_id');
    END LOOP;
END
$$;

-- The monthly cost ceiling, reserved before a model call: a call may start while the tenant's month (spent plus
-- the live reservations) is below the ceiling, and reserves its estimated cost, both decided under a lock of the
-- tenant's month row (reserve_budget, sql/definitions); the call's actual cost replaces the reservation when it
-- is recorded, a failed call releases it, and one its process never settled (killed) stops counting at
-- `expires_at`.
CREATE TABLE IF NOT EXISTS budget_reservations (
    user_id        TEXT NOT NULL DEFAULT '' CHECK (user_id = ''),
    tenant_id      TEXT NOT NULL,
    reservation_id BIGINT GENERATED ALWAYS AS IDENTITY,
    month          DATE NOT NULL CHECK (extract(day FROM month) = 1),
    amount         NUMERIC(18, 8) NOT NULL CHECK (amount >= 0),
    expires_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_id, tenant_id, reservation_id)
);

ALTER TABLE budget_reservations ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS budget_reservations_tenant ON budget_reservations;
CREATE POLICY budget_reservations_tenant ON budget_reservations
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
