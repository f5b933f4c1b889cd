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

-- inspect_tenant_users --
-- The inspector's list of a tenant's users: each with its conversations, current items and latest activity.
SELECT user_id, sum(conversations)::int AS conversations, sum(current_items)::int AS current_items,
       max(last_at) AS last_at
FROM (
    SELECT user_id, count(*) AS conversations, 0 AS current_items, max(updated_at) AS last_at
    FROM conversations WHERE tenant_id = %(tenant_id)s GROUP BY user_id
    UNION ALL
    SELECT user_id, 0, count(*) FILTER (WHERE valid_to IS NULL), max(updated_at)
    FROM items WHERE tenant_id = %(tenant_id)s GROUP BY user_id
) AS per_user
GROUP BY user_id
ORDER BY max(last_at) DESC NULLS LAST, user_id
LIMIT %(limit)s;

-- inspect_user_items --
-- Every version of the user's items, current first then the newest past ones, each with the turns it came from.
SELECT i.item_id, i.item_type, i.key, i.content, i.importance, i.valid_from, i.valid_to, i.is_summary,
       i.source_item_ids,
       COALESCE((SELECT jsonb_agg(jsonb_build_object('conversation_id', s.conversation_id,
                                                     'memory_id', s.memory_id,
                                                     'sequence_number', s.sequence_number) ORDER BY s.source_id)
                 FROM item_sources s
                 WHERE s.user_id = i.user_id AND s.tenant_id = i.tenant_id AND s.item_id = i.item_id),
                '[]'::jsonb) AS sources
FROM items i
WHERE i.tenant_id = %(tenant_id)s AND i.user_id = %(user_id)s
ORDER BY i.valid_to IS NOT NULL, i.valid_to DESC, i.importance DESC, i.item_id
LIMIT %(limit)s;

-- inspect_user_conversations --
-- The user's conversations, the latest active first.
SELECT conversation_id, round_count, created_at, updated_at
FROM conversations
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
ORDER BY updated_at DESC, conversation_id
LIMIT %(limit)s;

-- inspect_user_spend --
-- What the user's model calls cost, all time and per purpose.
SELECT purpose, count(*)::int AS calls, sum(input_tokens)::bigint AS input_tokens,
       sum(output_tokens)::bigint AS output_tokens, sum(cost) AS cost
FROM llm_calls
WHERE tenant_id = %(tenant_id)s AND user_id = %(user_id)s
GROUP BY purpose
ORDER BY purpose;
