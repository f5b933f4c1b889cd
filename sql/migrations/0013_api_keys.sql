-- 0013_api_keys: keys of the HTTP API (memory_agent.api). A key belongs to one tenant and sees only its rows.
-- Only the SHA-256 of a key is stored: a key is 32 random bytes, so a fast hash leaves nothing to guess, and a
-- request finds its key by the hash alone. key_prefix (the key's first characters) names a key in listings.
-- Not keyed by user_id: a request names its key before it names any user, so the table is a small reference
-- table (replicated to every node on Citus; see docs/scaling.md), with no foreign key to or from it.
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash BYTEA PRIMARY KEY CHECK (octet_length(key_hash) = 32),
    key_prefix TEXT NOT NULL,
    tenant_id TEXT NOT NULL CHECK (tenant_id <> ''),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys (tenant_id);
