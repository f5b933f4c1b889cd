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
-- Whether the tenant holds anything of the user: a conversation, a long-term item or a consolidation note.
SELECT EXISTS (SELECT 1 FROM conversations WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s)
    OR EXISTS (SELECT 1 FROM items WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s)
    OR EXISTS (SELECT 1 FROM consolidation_notes WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s)
    AS known;
