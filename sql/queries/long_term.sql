-- Named queries of the long-term tier (memory_agent/long_term). Each block starts with `-- name --` and a
-- one-line description. Every statement names its tenant and user; none reads across users.

-- lock_item_slot --
-- Writers of one slot take turns (until their transaction ends). Without it, two writers whose uncommitted rows
-- conflict in the exclusion index wait for each other until the deadlock detector (deadlock_timeout, 1 s) kills one.
SELECT pg_advisory_xact_lock(hashtextextended(
    concat_ws(chr(31), 'memory_agent.item', %(user_id)s::text, %(tenant_id)s::text, %(project)s::text,
              %(environment)s::text, %(item_type)s::text, %(key)s::text, %(value_slot)s::text), 0));

-- lock_current_item --
-- The current version of an item's slot, locked, and when the slot's history last ended (the next version starts no earlier).
SELECT current.item_id, current.content_norm, current.valid_from, settled.until
FROM (
    SELECT max(upper(valid_during)) AS until FROM items
    WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = %(project)s
      AND environment = %(environment)s AND item_type = %(item_type)s AND key = %(key)s
      AND value_slot = %(value_slot)s AND NOT upper_inf(valid_during)
) AS settled
LEFT JOIN LATERAL (
    SELECT item_id, content_norm, lower(valid_during) AS valid_from FROM items
    WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = %(project)s
      AND environment = %(environment)s AND item_type = %(item_type)s AND key = %(key)s
      AND value_slot = %(value_slot)s AND upper_inf(valid_during)
    FOR UPDATE
) AS current ON true;

-- restate_item --
-- The same content stated again: importance and confidence keep their highest value; the new lineage is added
-- (restate_item, sql/definitions).
SELECT restate_item(%(user_id)s, %(tenant_id)s, %(item_id)s::bigint, %(importance)s::real, %(confidence)s::real,
                    %(conversation_id)s, %(memory_id)s::integer, %(sequences)s::integer[], %(now)s::timestamptz);

-- close_item --
-- End a current version's validity at `until` (it is never deleted: as_of reads still find it).
UPDATE items SET valid_during = tstzrange(lower(valid_during), %(until)s), updated_at = %(until)s
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = %(item_id)s AND upper_inf(valid_during);

-- close_key --
-- A done todo: end every current (non-summary) version of its key, each no earlier than it began.
UPDATE items
SET valid_during = tstzrange(lower(valid_during), GREATEST(%(until)s, lower(valid_during) + interval '1 microsecond')),
    updated_at = GREATEST(%(until)s, lower(valid_during) + interval '1 microsecond')
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = %(project)s
  AND environment = %(environment)s AND item_type = %(item_type)s AND key = %(key)s
  AND NOT is_summary AND upper_inf(valid_during)
RETURNING item_id;

-- insert_item --
-- A new current version from `valid_from`, with its lineage (insert_item, sql/definitions); fails with 23P01 when a
-- concurrent writer opened one first.
SELECT insert_item(%(user_id)s, %(tenant_id)s, %(project)s, %(environment)s, %(item_type)s, %(key)s, %(value_slot)s,
                   %(content)s, %(content_norm)s, %(importance)s::real, %(confidence)s::real,
                   %(valid_from)s::timestamptz, %(conversation_id)s, %(memory_id)s::integer,
                   %(sequences)s::integer[], %(now)s::timestamptz) AS item_id;

-- add_item_sources --
-- Lineage of closed todos: one row per cited message (a null sequence when it cites none); known rows are kept
-- (add_item_sources, sql/definitions).
SELECT add_item_sources(%(user_id)s, %(tenant_id)s, %(item_ids)s::bigint[], %(conversation_id)s,
                        %(memory_id)s::integer, %(sequences)s::integer[], %(now)s::timestamptz);

-- list_items --
-- A user's items current at `as_of` (null: now, with cluster summaries) with their lineage, most important first.
SELECT i.item_id, i.tenant_id, i.user_id, i.project, i.environment, i.item_type, i.key, i.content,
       i.importance, i.confidence, i.valid_from, i.valid_to, i.is_summary, i.source_item_ids,
       i.created_at, i.updated_at, lineage.sources
FROM items AS i
CROSS JOIN LATERAL (
    SELECT COALESCE(jsonb_agg(jsonb_build_object('conversation_id', s.conversation_id, 'memory_id', s.memory_id,
                                                 'sequence_number', s.sequence_number)
                              ORDER BY s.conversation_id, s.memory_id, s.sequence_number), '[]') AS sources
    FROM item_sources AS s WHERE s.user_id = i.user_id AND s.item_id = i.item_id
) AS lineage
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s
  AND (%(as_of)s::timestamptz IS NULL AND upper_inf(i.valid_during)
       OR i.valid_during @> %(as_of)s::timestamptz AND NOT i.is_summary)
  AND (%(item_type)s::text IS NULL OR i.item_type = %(item_type)s)
  AND (%(key)s::text IS NULL OR i.key = %(key)s)
  AND (%(project)s::text IS NULL OR i.project = %(project)s)
  AND (%(environment)s::text IS NULL OR i.environment = %(environment)s)
  AND (%(include_summaries)s OR NOT i.is_summary)
ORDER BY i.importance DESC, i.item_id;

-- item_history --
-- Every version of one key, oldest first (cluster summaries excluded).
SELECT item_id, tenant_id, user_id, project, environment, item_type, key, content, importance, confidence,
       valid_from, valid_to, is_summary, source_item_ids, created_at, updated_at, '[]'::jsonb AS sources
FROM items
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = %(project)s
  AND environment = %(environment)s AND item_type = %(item_type)s AND key = %(key)s AND NOT is_summary
ORDER BY lower(valid_during), item_id;

-- lock_cluster_summary --
-- A cluster's summary row, locked: refreshers of one cluster take turns.
SELECT item_id, source_item_ids, importance, confidence FROM items
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = %(project)s
  AND environment = %(environment)s AND item_type = %(item_type)s AND key = %(key)s
  AND value_slot = 'summary' AND upper_inf(valid_during)
FOR UPDATE;

-- cluster_members --
-- The current items a cluster summary stands for, oldest first.
SELECT item_id, content, importance, confidence FROM items
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = %(project)s
  AND environment = %(environment)s AND item_type = %(item_type)s AND key = %(key)s
  AND NOT is_summary AND upper_inf(valid_during)
ORDER BY item_id;

-- insert_cluster_summary --
-- A cluster's first summary; fails with 23P01 when a concurrent refresher made one first.
INSERT INTO items (user_id, tenant_id, project, environment, item_type, key, value_slot, content, content_norm,
                   importance, confidence, valid_during, is_summary, source_item_ids, created_at, updated_at)
VALUES (%(user_id)s, %(tenant_id)s, %(project)s, %(environment)s, %(item_type)s, %(key)s, 'summary',
        %(content)s, %(content_norm)s, %(importance)s, %(confidence)s, tstzrange(%(now)s, NULL), true,
        %(source_item_ids)s, %(now)s, %(now)s)
RETURNING item_id;

-- update_cluster_summary --
-- Refresh a summary in place: same row, new text and members.
UPDATE items
SET content = %(content)s, content_norm = %(content_norm)s, source_item_ids = %(source_item_ids)s,
    importance = %(importance)s, confidence = %(confidence)s, updated_at = %(now)s
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = %(item_id)s;

-- set_cluster_weight --
-- Members restated with a higher importance: the summary follows without a model call.
UPDATE items SET importance = %(importance)s, confidence = %(confidence)s
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = %(item_id)s
  AND (importance, confidence) IS DISTINCT FROM (%(importance)s::real, %(confidence)s::real);

-- pending_clusters --
-- Clusters whose summary is missing, stale or due for removal (the periodic safety net); tenant/user null: all.
WITH members AS (
    SELECT user_id, tenant_id, project, environment, item_type, key, array_agg(item_id ORDER BY item_id) AS ids
    FROM items
    WHERE NOT is_summary AND upper_inf(valid_during)
      AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
      AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s)
    GROUP BY user_id, tenant_id, project, environment, item_type, key
), summaries AS (
    SELECT user_id, tenant_id, project, environment, item_type, key, source_item_ids
    FROM items
    WHERE is_summary AND upper_inf(valid_during)
      AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
      AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s)
)
SELECT user_id, tenant_id, project, environment, item_type, key
FROM members FULL JOIN summaries USING (user_id, tenant_id, project, environment, item_type, key)
WHERE (cardinality(members.ids) >= %(min_items)s AND summaries.source_item_ids IS DISTINCT FROM members.ids)
   OR (summaries.source_item_ids IS NOT NULL AND COALESCE(cardinality(members.ids), 0) < %(min_items)s)
ORDER BY user_id, tenant_id, project, environment, item_type, key
LIMIT %(limit)s;

-- delete_items --
-- Erase items by id (their lineage goes with them); returns what was erased.
DELETE FROM items
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = ANY(%(item_ids)s::bigint[])
RETURNING item_id, is_summary, source_item_ids;

-- erase_conversation_sources --
-- Erase the lineage a conversation gave; returns the items that lost some.
DELETE FROM item_sources
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND conversation_id = %(conversation_id)s
RETURNING item_id;

-- delete_unsourced_items --
-- Of the given items, erase those no lineage row is left for (an item someone else also stated stays).
DELETE FROM items AS i
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND i.item_id = ANY(%(item_ids)s::bigint[])
  AND NOT i.is_summary
  AND NOT EXISTS (SELECT 1 FROM item_sources AS s WHERE s.user_id = i.user_id AND s.item_id = i.item_id)
RETURNING item_id;

-- summaries_over --
-- The cluster summaries built from any of the given items.
SELECT item_id, project, environment, item_type, key FROM items
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND is_summary
  AND source_item_ids && %(item_ids)s::bigint[];

-- delete_user_items --
-- Erase every long-term row of a user (lineage cascades).
DELETE FROM items WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s RETURNING item_id;

-- delete_user_consolidation --
-- Erase a user's consolidation rows (notes and batch summaries hold their text; the schedule would bring them due).
WITH batches AS (
    DELETE FROM batch_summaries WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
), schedules AS (
    DELETE FROM consolidation_schedules WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
)
DELETE FROM consolidation_notes WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s RETURNING note_id;

-- lock_user_conversations --
-- Hold the user's conversations (all, or the one named) until the forget commits: a summary job already holding
-- one (hold_conversation) is waited for, and the items it wrote are then seen and erased; a later job finds the
-- conversation gone and writes nothing.
SELECT conversation_id FROM conversations
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
  AND (%(conversation_id)s::text IS NULL OR conversation_id = %(conversation_id)s)
ORDER BY conversation_id
FOR UPDATE;

-- erase_conversation_rows --
-- The conversation tier of one conversation, first step: the conversation (messages and memory versions cascade), in
-- a statement of its own. A round end that made the row after lock_user_conversations looked holds it until it
-- commits: this waits for it, so the next statement (erase_conversation_traces, a later snapshot) sees its metrics.
DELETE FROM conversations
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND conversation_id = %(conversation_id)s
RETURNING conversation_id;

-- erase_user_conversations --
-- forget_user's conversation tier, first step: every conversation of the user (messages and memory versions
-- cascade), in one statement of its own. A round end that made a row after lock_user_conversations looked holds it
-- until it commits: this waits for it, so the next statement (erase_user_traces, a later snapshot) sees its metrics.
DELETE FROM conversations
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
RETURNING conversation_id;

-- erase_conversation_traces --
-- The conversation tier of one conversation, second step: its metrics and lease (its owner row, keyed by thread
-- id, is released after the erasure commits: release_thread).
WITH leases AS (
    DELETE FROM round_leases
    WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND conversation_id = %(conversation_id)s
)
DELETE FROM round_metrics
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND conversation_id = %(conversation_id)s;

-- clear_recalled_blocks --
-- After a forget: the recalled blocks (round_metrics.recall_block, 0019) of the user's rounds that quoted what is
-- gone — a hit (or a turn behind it) of a conversation of the user no longer stored, an item, note or batch
-- summary no longer stored — or what was rewritten: a cluster summary among `item_ids` (refreshed in place) or made from one of
-- them. Whatever a forget erased, every block that showed it goes. The block is one text, so it goes whole; the
-- round's other figures (path, items, tokens) stay. Every table read names the user (on Citus: routed to their shard).
UPDATE round_metrics AS r SET recall_block = NULL, recall_hits = NULL
WHERE r.user_id = %(user_id)s AND r.tenant_id = %(tenant_id)s AND r.recall_hits IS NOT NULL
  AND EXISTS (
      SELECT 1 FROM jsonb_array_elements(r.recall_hits) AS h
      WHERE EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(h -> 'sources', '[]')
                                  || jsonb_build_array(jsonb_build_array(h ->> 'conversation_id'))) AS s (pair)
                    WHERE s.pair ->> 0 IS NOT NULL
                      AND NOT EXISTS (SELECT 1 FROM conversations AS c
                                      WHERE c.user_id = %(user_id)s AND c.conversation_id = s.pair ->> 0))
         OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(coalesce(h -> 'item_ids', '[]')) AS x (item_id)
                    WHERE x.item_id::bigint = ANY(%(item_ids)s::bigint[])
                       OR NOT EXISTS (SELECT 1 FROM items AS i
                                      WHERE i.user_id = %(user_id)s AND i.item_id = x.item_id::bigint))
         OR (h ? 'item_ids'
             AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(coalesce(h -> 'source_item_ids', '[]')) AS x (item_id)
                         WHERE x.item_id::bigint = ANY(%(item_ids)s::bigint[])))
         OR (h ? 'note_id'
             AND NOT EXISTS (SELECT 1 FROM consolidation_notes AS n
                             WHERE n.user_id = %(user_id)s AND n.note_id = (h ->> 'note_id')::bigint))
         OR (h ? 'batch_summary_id'
             AND NOT EXISTS (SELECT 1 FROM batch_summaries AS b
                             WHERE b.user_id = %(user_id)s AND b.summary_id = (h ->> 'batch_summary_id')::bigint)));

-- set_tenant --
-- Name the tenant row-level security filters by, until the end of the transaction (SET LOCAL; on Citus on the
-- workers too: name_transaction_tenant, sql/definitions).
SELECT name_transaction_tenant(%(tenant_id)s);
