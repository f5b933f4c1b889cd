-- create_api_key --
-- A new key of a tenant (its hash; the key itself is shown once and never stored).
INSERT INTO api_keys (key_hash, key_prefix, tenant_id)
VALUES (%(key_hash)s, %(key_prefix)s, %(tenant_id)s)
RETURNING key_prefix, tenant_id, created_at;

-- api_key_tenant --
-- The tenant of a key that is not revoked (no row: unknown or revoked key), through api_key_tenant()
-- (sql/definitions): a role bound by row-level security resolves keys before it knows a tenant.
SELECT tenant_id FROM api_key_tenant(%(key_hash)s);

-- tenant_user_known --
-- Whether the tenant holds anything of the user: a conversation, a long-term item, a consolidation note or a batch
-- summary.
SELECT EXISTS (SELECT 1 FROM conversations WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s)
    OR EXISTS (SELECT 1 FROM items WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s)
    OR EXISTS (SELECT 1 FROM consolidation_notes WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s)
    OR EXISTS (SELECT 1 FROM batch_summaries WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s)
    AS known;

-- list_api_keys --
-- Every key (its prefix, never the key), of one tenant or of all, oldest first; revoked ones with their time.
SELECT key_prefix, tenant_id, created_at, revoked_at
FROM api_keys
WHERE %(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s
ORDER BY created_at, key_prefix;

-- live_api_keys_matching --
-- The live keys a revoke names (the whole key, or the prefix a listing shows), locked until the revoke commits.
SELECT key_hash, key_prefix, tenant_id
FROM api_keys
WHERE revoked_at IS NULL AND (key_hash = %(key_hash)s OR key_prefix = %(key_prefix)s)
ORDER BY key_prefix
FOR UPDATE;

-- revoke_api_key --
-- Revoke one live key: its requests answer 401 from now on.
UPDATE api_keys SET revoked_at = now() WHERE key_hash = %(key_hash)s AND revoked_at IS NULL
RETURNING key_prefix, tenant_id, revoked_at;
