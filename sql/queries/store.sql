-- Named queries of the LangGraph store (memory_agent/long_term/store.py): its rows are long-term items whose
-- store_namespace is set (sql/migrations/0011_store.sql). Every statement names its tenant and user.

-- store_lock_current --
-- The current version of a store key, locked, and when the key's history last ended (the next version starts no earlier).
SELECT current.item_id, current.value, current.valid_from, settled.until
FROM (
    SELECT max(upper(valid_during)) AS until FROM items
    WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = '' AND environment = ''
      AND item_type = %(item_type)s AND key = %(key)s AND value_slot = %(value_slot)s
      AND NOT upper_inf(valid_during)
) AS settled
LEFT JOIN LATERAL (
    SELECT item_id, value, lower(valid_during) AS valid_from FROM items
    WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = '' AND environment = ''
      AND item_type = %(item_type)s AND key = %(key)s AND value_slot = %(value_slot)s
      AND upper_inf(valid_during)
    FOR UPDATE
) AS current ON true;

-- store_touch --
-- The same value put again: no new version, only the time it was last put.
UPDATE items SET updated_at = GREATEST(updated_at, %(now)s)
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = %(item_id)s;

-- store_insert --
-- A new current version of a store key from `valid_from`, with one lineage row (no conversation: the application put
-- it): insert_store_item, sql/definitions.
SELECT insert_store_item(%(user_id)s, %(tenant_id)s, %(item_type)s, %(key)s, %(value_slot)s, %(content)s,
                         %(content_norm)s, %(valid_from)s, %(namespace)s::text[], %(value)s::jsonb,
                         %(now)s) AS item_id;

-- store_get --
-- The current version of a store key; created_at is when its first version was put (item_versions).
SELECT i.store_namespace AS namespace, i.key, i.value, i.first_put_at AS created_at, i.updated_at
FROM item_versions AS i
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND i.project = '' AND i.environment = ''
  AND i.item_type = %(item_type)s AND i.key = %(key)s AND i.value_slot = %(value_slot)s
  AND upper_inf(i.valid_during);

-- store_versions --
-- Every version of a store key, current or closed (what a delete forgets).
SELECT item_id FROM items
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = '' AND environment = ''
  AND item_type = %(item_type)s AND key = %(key)s AND value_slot = %(value_slot)s
ORDER BY item_id;

-- store_search --
-- A user's current store rows under a namespace prefix whose fields equal the filter's; with a query, those whose text matches (full text on OR-ed terms, or trigram word similarity, or the query as a substring), best first.
WITH matched AS (
    SELECT i.item_id, i.store_namespace, i.key, i.value, i.updated_at,
           ts_rank_cd(to_tsvector(%(config)s::regconfig, left(i.content, 100000)), q.terms) AS fts_score,
           to_tsvector(%(config)s::regconfig, left(i.content, 100000)) @@ q.terms AS fts_hit,
           word_similarity(%(query)s, i.content) AS trgm_score,
           strpos(lower(i.content), lower(%(query)s)) > 0 AS substring_hit
    FROM items AS i
    CROSS JOIN (SELECT websearch_to_tsquery(%(config)s::regconfig, %(terms)s) AS terms) AS q
    WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND i.store_namespace IS NOT NULL
      AND upper_inf(i.valid_during)
      AND i.store_namespace[1:cardinality(%(prefix)s::text[])] = %(prefix)s::text[]
      AND NOT EXISTS (
          SELECT 1 FROM jsonb_each(%(filter)s::jsonb) AS f WHERE i.value -> f.key IS DISTINCT FROM f.value
      )
), page AS (
    SELECT item_id, store_namespace, key, value, updated_at,
           CASE WHEN %(query)s::text IS NULL THEN NULL
                ELSE fts_score + trgm_score + CASE WHEN substring_hit THEN 1 ELSE 0 END END AS score
    FROM matched
    WHERE %(query)s::text IS NULL OR fts_hit OR substring_hit OR trgm_score >= %(trgm_threshold)s
    ORDER BY score DESC NULLS LAST, updated_at DESC, item_id DESC
    LIMIT %(limit)s OFFSET %(offset)s
)
SELECT page.item_id, page.store_namespace AS namespace, page.key, page.value, v.first_put_at AS created_at,
       page.updated_at, page.score
FROM page
JOIN item_versions AS v ON v.user_id = %(user_id)s AND v.tenant_id = %(tenant_id)s AND v.item_id = page.item_id
ORDER BY page.score DESC NULLS LAST, page.updated_at DESC, page.item_id DESC;

-- store_namespaces --
-- The namespaces a user's current store rows are in.
SELECT DISTINCT store_namespace AS namespace FROM items
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND store_namespace IS NOT NULL
  AND upper_inf(valid_during)
ORDER BY 1;

-- store_rows_by_id --
-- Of the given items of a user, those put through the store, as the store shows them (what recall found is
-- shown as put when it was put there); created_at is when the key's first version was put.
SELECT i.item_id, i.store_namespace AS namespace, i.key, i.value, i.first_put_at AS created_at, i.updated_at
FROM item_versions AS i
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND i.item_id = ANY(%(item_ids)s::bigint[])
  AND i.store_namespace IS NOT NULL;

-- store_derived_item --
-- The user's item `item_id` when it was not put through the store and no store row holds the key (`item:<id>`)
-- in this namespace: the key a search gave it names it.
SELECT i.item_id FROM items AS i
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND i.item_id = %(item_id)s
  AND i.store_namespace IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM items AS s
      WHERE s.user_id = %(user_id)s AND s.tenant_id = %(tenant_id)s AND s.project = '' AND s.environment = ''
        AND s.item_type = %(item_type)s AND s.key = %(key)s AND s.value_slot = %(value_slot)s);
