-- 0017_tenant_rls: row-level security on every table that holds a tenant's data, and the cost ceiling's
-- reservations.
-- 0008, 0009, 0010 and 0014 gave the long-term tier, the consolidation tables and the guards a policy per tenant;
-- the conversation tier had none, so a role bound by the policies still read every tenant's messages, memory,
-- conversations and round metrics. Same rule here: a role that does not own the tables sees and writes the rows of
-- the tenant its transaction names (memory_agent.tenant_id) and nothing else; the owner bypasses the policies.
-- The views read the tables as the querying role (security_invoker, sql/definitions), so the policies hold
-- through them too. docs/privacy.md ("Row-level security") describes the setup.

ALTER TABLE conversations ENABLE ROW LEVEL SECURITY;
ALTER TABLE conversation_owners ENABLE ROW LEVEL SECURITY;
ALTER TABLE messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory ENABLE ROW LEVEL SECURITY;
ALTER TABLE round_metrics ENABLE ROW LEVEL SECURITY;
ALTER TABLE round_leases ENABLE ROW LEVEL SECURITY;
-- A key's tenant is read before any tenant is known: through api_key_tenant() (sql/definitions, SECURITY
-- DEFINER, one hash in, one tenant out); every other read or write of the keys is the tenant's own.
ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS conversations_tenant ON conversations;
CREATE POLICY conversations_tenant ON conversations
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS conversation_owners_tenant ON conversation_owners;
CREATE POLICY conversation_owners_tenant ON conversation_owners
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS messages_tenant ON messages;
CREATE POLICY messages_tenant ON messages
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS memory_tenant ON memory;
CREATE POLICY memory_tenant ON memory
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS round_metrics_tenant ON round_metrics;
CREATE POLICY round_metrics_tenant ON round_metrics
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS round_leases_tenant ON round_leases;
CREATE POLICY round_leases_tenant ON round_leases
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));
DROP POLICY IF EXISTS api_keys_tenant ON api_keys;
CREATE POLICY api_keys_tenant ON api_keys
    USING (tenant_id = current_setting('memory_agent.tenant_id', true));

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
