-- Named queries of recall (memory_agent/long_term/recall.py and embeddings.py).
-- Every statement runs with search_path set to the memory_agent schema. `recall_search` has placeholders:
-- {vector_hits}, filled with `recall_vector_hits` when an embedder is configured and `recall_no_vector_hits`
-- otherwise (the embeddings table exists only where pgvector does); {message_fts}, {item_fts}, {note_fts}: the stored
-- 'english' vectors or vectors computed in the configured one.

-- recall_settings --
-- For recall's transaction: the word similarity a trigram hit needs (the operator's index reads it), and the plan
-- cache mode. With the stored 'english' vectors the statement has no configuration-dependent expression, so one
-- generic plan per connection serves every call (planning was ~1.5 ms of a ~4 ms recall); with any other
-- configuration the configuration must be a constant for the planner to match the expression index, hence
-- custom plans. And the tenant row-level security filters by: recall reads the items, summaries and notes of the
-- tenant it was asked for, whichever role runs it (a role bound by the policies saw turns only without it).
SELECT set_config('pg_trgm.word_similarity_threshold', %(threshold)s, true),
       set_config('plan_cache_mode', %(plan_cache_mode)s, true),
       set_config('memory_agent.tenant_id', %(tenant_id)s, true)

-- recall_search --
-- One user's candidates from every retrieval path (full text, trigrams, vectors, recent), fused by reciprocal rank:
-- turns, items and cluster summaries, and the key insights of weekly and monthly consolidation notes.
WITH user_turns AS NOT MATERIALIZED (
    -- The one place turns are scoped to a user: every conversation of theirs (the messages key leads with
    -- user_id), in their tenant.
    SELECT m.conversation_id, m.sequence_number, m.role, m.content, m.created_at, m.has_cjk,
           {message_fts} AS fts
    FROM messages AS m
    WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s
      AND m.role IN ('user', 'assistant')
      AND (%(as_of)s::timestamptz IS NULL OR m.created_at <= %(as_of)s::timestamptz)
), user_items AS NOT MATERIALIZED (
    -- Items and cluster summaries valid at `as_of`, current ones without it.
    SELECT i.item_id, i.is_summary, i.content, i.has_cjk,
           {item_fts} AS fts
    FROM items AS i
    WHERE i.tenant_id = %(tenant_id)s AND i.user_id = %(user_id)s
      AND CASE WHEN %(as_of)s::timestamptz IS NULL THEN upper_inf(i.valid_during)
               ELSE i.valid_during @> %(as_of)s::timestamptz END
), user_notes AS NOT MATERIALIZED (
    -- Weekly and monthly consolidation notes, whose key insights are recalled as summaries (dailies are the raw
    -- material of those rollups, and compacted after a month). Written by then, with `as_of`.
    SELECT n.note_id, n.period_start, n.key_insights, {note_fts} AS fts
    FROM consolidation_notes AS n
    WHERE n.user_id = %(user_id)s AND n.tenant_id = %(tenant_id)s AND n.period IN ('weekly', 'monthly')
      AND (%(as_of)s::timestamptz IS NULL OR n.created_at <= %(as_of)s::timestamptz)
), terms AS (
    -- OR-ed terms: AND-ed terms (plainto/websearch_to_tsquery) match almost no question.
    SELECT CASE WHEN %(or_terms)s
                THEN regexp_replace(plainto_tsquery(%(config)s::regconfig, %(query)s)::text,
                                    ' (&|<->|<[0-9]+>) ', ' | ', 'g')::tsquery
                ELSE plainto_tsquery(%(config)s::regconfig, %(query)s) END AS q
), fts AS (
    SELECT kind, conversation_id, sequence_number, item_id,
           row_number() OVER (ORDER BY score DESC, sequence_number DESC) AS rank
    FROM (
        SELECT 'turn' AS kind, t.conversation_id, t.sequence_number, (NULL::items).item_id,
               ts_rank(t.fts, (SELECT q FROM terms)) AS score
        FROM user_turns AS t
        WHERE %(use_fts)s AND t.fts @@ (SELECT q FROM terms)
        UNION ALL
        SELECT 'item', NULL, NULL, i.item_id, ts_rank(i.fts, (SELECT q FROM terms))
        FROM user_items AS i
        WHERE %(use_fts)s AND i.fts @@ (SELECT q FROM terms)
        UNION ALL
        -- A key insight: its note (item_id holds the note id) and its place in key_insights (sequence_number).
        -- The note's index finds the notes; the insights of the 4 best-matching ones (newest first among equals)
        -- are matched one by one: vectorizing every insight of every matching note cost 0.6 ms for a common word.
        SELECT 'insight', NULL, k.ordinal::integer, n.note_id,
               ts_rank(to_tsvector(%(config)s::regconfig, k.insight), (SELECT q FROM terms))
        FROM (SELECT b.note_id, b.key_insights
              FROM user_notes AS b
              WHERE %(use_fts)s AND b.fts @@ (SELECT q FROM terms)
              ORDER BY ts_rank(b.fts, (SELECT q FROM terms)) DESC, b.period_start DESC
              LIMIT 4) AS n
        CROSS JOIN LATERAL unnest(n.key_insights) WITH ORDINALITY AS k (insight, ordinal)
        WHERE to_tsvector(%(config)s::regconfig, k.insight) @@ (SELECT q FROM terms)
        ORDER BY 5 DESC
        LIMIT %(candidates)s
    ) AS hits
), trgm_gate AS (
    -- Trigrams run when asked to, for CJK queries (one token to the parser), or when full text found too little
    -- (a short or misspelled query); a short query that full text answers skips them: measured, they added
    -- ~6 ms and no evidence recall on the synthetic dataset.
    SELECT %(trgm_always)s OR (%(trgm_fallback)s AND (%(cjk)s OR (SELECT count(*) FROM fts) < %(min_hits)s))
        AS open
), trgm_matches AS (
    -- Word similarity through the trigram indexes, above the threshold the caller set for this transaction
    -- (pg_trgm.word_similarity_threshold); or a CJK bigram of the query in the text: two characters have no
    -- trigram, so those are read from the user's rows (strpos: no index would serve them).
    SELECT 'turn' AS kind, t.conversation_id, t.sequence_number, (NULL::items).item_id, t.content
    FROM user_turns AS t
    WHERE (SELECT open FROM trgm_gate) AND (SELECT %(query)s::text) <%% t.content
    UNION
    SELECT 'turn', t.conversation_id, t.sequence_number, (NULL::items).item_id, t.content
    FROM user_turns AS t
    WHERE cardinality(%(bigrams)s::text[]) > 0 AND (SELECT open FROM trgm_gate) AND t.has_cjk
      AND EXISTS (SELECT 1 FROM unnest((SELECT %(bigrams)s::text[])) AS b WHERE strpos(t.content, b) > 0)
    UNION
    SELECT 'item', NULL, NULL, i.item_id, i.content
    FROM user_items AS i
    WHERE (SELECT open FROM trgm_gate) AND (SELECT %(query)s::text) <%% i.content
    UNION
    SELECT 'item', NULL, NULL, i.item_id, i.content
    FROM user_items AS i
    WHERE cardinality(%(bigrams)s::text[]) > 0 AND (SELECT open FROM trgm_gate) AND i.has_cjk
      AND EXISTS (SELECT 1 FROM unnest((SELECT %(bigrams)s::text[])) AS b WHERE strpos(i.content, b) > 0)
    UNION
    -- CJK key insights by their bigrams (a user has a few weekly and monthly notes: read through their key).
    SELECT 'insight', NULL, k.ordinal::integer, n.note_id, k.insight
    FROM user_notes AS n
    CROSS JOIN LATERAL unnest(n.key_insights) WITH ORDINALITY AS k (insight, ordinal)
    WHERE cardinality(%(bigrams)s::text[]) > 0 AND (SELECT open FROM trgm_gate)
      AND EXISTS (SELECT 1 FROM unnest((SELECT %(bigrams)s::text[])) AS b WHERE strpos(k.insight, b) > 0)
), trgm AS (
    SELECT kind, conversation_id, sequence_number, item_id,
           row_number() OVER (ORDER BY score DESC, sequence_number DESC) AS rank
    FROM (
        SELECT kind, conversation_id, sequence_number, item_id,
               greatest(word_similarity(%(query)s, content),
                        (SELECT count(*) FROM unnest(%(bigrams)s::text[]) AS b WHERE strpos(content, b) > 0)::real
                            / greatest(cardinality(%(bigrams)s::text[]), 1)) AS score
        FROM trgm_matches
        ORDER BY 5 DESC
        LIMIT %(candidates)s
    ) AS hits
), vec AS (
    {vector_hits}
), recent AS (
    -- Nothing found on any path: the latest turns of the user's most recently active other conversation.
    SELECT 'turn' AS kind, t.conversation_id, t.sequence_number, (NULL::items).item_id,
           row_number() OVER (ORDER BY t.sequence_number DESC) AS rank
    FROM user_turns AS t
    WHERE %(recent)s > 0
      AND NOT EXISTS (SELECT 1 FROM fts) AND NOT EXISTS (SELECT 1 FROM trgm) AND NOT EXISTS (SELECT 1 FROM vec)
      AND t.conversation_id = (
          SELECT l.conversation_id FROM user_turns AS l
          WHERE l.conversation_id IS DISTINCT FROM %(conversation_id)s
          ORDER BY l.created_at DESC, l.sequence_number DESC
          LIMIT 1)
    ORDER BY t.sequence_number DESC
    LIMIT %(recent)s
), scope AS (
    -- This conversation first; the whole user when it has few hits or the message points to the past.
    SELECT %(conversation_id)s::text IS NULL OR %(past)s
           OR (SELECT count(*) FROM (SELECT conversation_id FROM fts UNION ALL SELECT conversation_id FROM trgm) AS h
               WHERE h.conversation_id = %(conversation_id)s) < %(min_hits)s AS user_wide
), ranked AS (
    SELECT *, 'fts' AS path FROM fts
    UNION ALL SELECT *, 'trgm' FROM trgm
    UNION ALL SELECT *, 'vector' FROM vec
    UNION ALL SELECT *, 'recent' FROM recent
), fused AS (
    SELECT r.kind, r.conversation_id, r.sequence_number, r.item_id,
           sum(1.0 / (%(rrf_k)s + r.rank)) AS score, array_agg(r.path ORDER BY r.path) AS paths
    FROM ranked AS r, scope
    WHERE r.kind <> 'turn' OR r.conversation_id = %(conversation_id)s OR scope.user_wide
    GROUP BY r.kind, r.conversation_id, r.sequence_number, r.item_id
    ORDER BY score DESC
    LIMIT %(fused_limit)s
), counts AS (
    SELECT (SELECT count(*) FROM fts) AS fts_hits, (SELECT count(*) FROM trgm) AS trgm_hits,
           (SELECT count(*) FROM vec) AS vector_hits, (SELECT count(*) FROM recent) AS recent_hits,
           (SELECT open FROM trgm_gate) AS trgm_ran, (SELECT user_wide FROM scope) AS user_wide
)
SELECT counts.*, f.kind, f.score::float8 AS score, f.paths, f.conversation_id, f.sequence_number, f.item_id,
       coalesce(t.role, CASE WHEN i.is_summary THEN 'summary' ELSE i.item_type END, n.period) AS role,
       coalesce(t.content, i.content, n.key_insights[f.sequence_number]) AS text,
       coalesce(i.is_summary, n.note_id IS NOT NULL) AS is_summary, i.source_item_ids, i.item_type, i.key,
       lower(i.valid_during) AS valid_from, t.created_at, n.note_id, n.period, n.period_start,
       src.sources
FROM counts
LEFT JOIN fused AS f ON true
LEFT JOIN messages AS t
       ON f.kind = 'turn' AND t.user_id = %(user_id)s AND t.conversation_id = f.conversation_id
      AND t.sequence_number = f.sequence_number
LEFT JOIN items AS i ON f.kind = 'item' AND i.user_id = %(user_id)s AND i.item_id = f.item_id
LEFT JOIN consolidation_notes AS n ON f.kind = 'insight' AND n.user_id = %(user_id)s AND n.note_id = f.item_id
LEFT JOIN LATERAL (
    -- Provenance: the turns an item came from; for a cluster summary, also those of its source items.
    SELECT jsonb_agg(DISTINCT jsonb_build_array(s.conversation_id, s.sequence_number)) AS sources
    FROM item_sources AS s
    WHERE f.kind = 'item' AND s.user_id = %(user_id)s AND s.tenant_id = %(tenant_id)s
      AND (s.item_id = f.item_id OR s.item_id = ANY(i.source_item_ids))
      AND s.conversation_id IS NOT NULL AND s.sequence_number IS NOT NULL
) AS src ON true
ORDER BY f.score DESC NULLS LAST, coalesce(i.is_summary, n.note_id IS NOT NULL) DESC NULLS LAST, f.kind,
         f.sequence_number

-- recall_message_fts_stored --
-- The full-text vector of a turn when the configuration is 'english': the stored column (and its index).
m.fts_english

-- recall_item_fts_stored --
-- The full-text vector of an item when the configuration is 'english': the stored column (and its index).
i.fts_english

-- recall_note_fts_stored --
-- The full-text vector of a note's key insights when the configuration is 'english': the stored column (0015).
n.key_insights_fts_english

-- recall_message_fts_computed --
-- The full-text vector of a turn in any other configuration, computed (an expression index serves 'simple').
to_tsvector(%(config)s::regconfig, m.content)

-- recall_item_fts_computed --
-- The full-text vector of an item in any other configuration, computed (an expression index serves 'simple').
to_tsvector(%(config)s::regconfig, i.content)

-- recall_note_fts_computed --
-- The full-text vector of a note's key insights in any other configuration, computed.
to_tsvector(%(config)s::regconfig, n.key_insights_text)

-- recall_vector_hits --
-- The vector path: nearest items and summaries of the user by cosine distance (turns are never embedded); a
-- fallback like trigrams (as designed) unless asked for always: an exact scan of a user's vectors costs.
    SELECT 'item' AS kind, NULL AS conversation_id, NULL::integer AS sequence_number, i.item_id,
           row_number() OVER (ORDER BY e.embedding <=> %(query_vector)s::vector) AS rank
    FROM item_embeddings AS e
    JOIN user_items AS i ON i.item_id = e.item_id
    WHERE (%(vector_always)s OR (SELECT count(*) FROM (SELECT 1 FROM fts UNION ALL SELECT 1 FROM trgm) AS h) < %(min_hits)s)
      AND e.tenant_id = %(tenant_id)s AND e.user_id = %(user_id)s AND e.model = %(model)s
      AND vector_dims(e.embedding) = vector_dims(%(query_vector)s::vector)
      AND e.embedding <=> %(query_vector)s::vector <= 1 - %(vector_min_similarity)s
    ORDER BY e.embedding <=> %(query_vector)s::vector
    LIMIT %(candidates)s

-- recall_no_vector_hits --
-- No embedder configured (or no pgvector): the vector path is empty.
    SELECT 'item' AS kind, NULL AS conversation_id, NULL::integer AS sequence_number, (NULL::items).item_id,
           0::bigint AS rank
    WHERE false

-- items_to_embed --
-- Items and summaries of a user (current ones) that have no vector of `model` yet, oldest first.
SELECT i.item_id, i.content
FROM items AS i
WHERE i.tenant_id = %(tenant_id)s AND i.user_id = %(user_id)s AND upper_inf(i.valid_during)
  AND NOT EXISTS (SELECT 1 FROM item_embeddings AS e
                  WHERE e.user_id = i.user_id AND e.item_id = i.item_id AND e.model = %(model)s)
ORDER BY i.item_id
LIMIT %(batch)s

-- save_item_embedding --
-- One item's vector; a vector of another model is replaced (a row per item: the configured embedder's).
INSERT INTO item_embeddings (user_id, tenant_id, item_id, model, embedding)
VALUES (%(user_id)s, %(tenant_id)s, %(item_id)s, %(model)s, %(embedding)s::vector)
ON CONFLICT (user_id, item_id) DO UPDATE SET model = excluded.model, embedding = excluded.embedding

-- users_to_embed --
-- Users with a current item or summary that has no vector of `model` (the periodic catch-up of indexing).
SELECT DISTINCT i.tenant_id, i.user_id
FROM items AS i
WHERE upper_inf(i.valid_during)
  AND NOT EXISTS (SELECT 1 FROM item_embeddings AS e
                  WHERE e.user_id = i.user_id AND e.item_id = i.item_id AND e.model = %(model)s)
LIMIT %(limit)s

-- delete_item_embedding --
-- The vector of one item (a cluster summary whose text was refreshed in place: the vector was the old text's).
DELETE FROM item_embeddings
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = %(item_id)s

-- vectors_available --
-- Whether the embeddings table exists (pgvector was installed when the migrations ran).
SELECT to_regclass('item_embeddings') IS NOT NULL AS available

-- recall_source_turns --
-- The stored turns of one user a recalled hit came from, by (conversation_id, sequence_number) pairs, in order.
SELECT m.conversation_id, m.sequence_number, m.role, m.content, m.created_at
FROM unnest(%(conversation_ids)s::text[], %(sequences)s::integer[]) AS p (conversation_id, sequence_number)
JOIN messages AS m USING (conversation_id, sequence_number)
WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s
ORDER BY m.conversation_id, m.sequence_number

-- eval_insert_conversation --
-- Evaluation ingestion: a conversation of one user whose turns are stored directly (not through the round
-- path), with its owner row as a round's first save writes it.
WITH owner AS (
    INSERT INTO conversation_owners (conversation_id, tenant_id, user_id, created_at)
    VALUES (%(conversation_id)s, %(tenant_id)s, %(user_id)s, %(created_at)s)
)
INSERT INTO conversations (user_id, tenant_id, conversation_id, next_sequence, round_count, created_at, updated_at)
VALUES (%(user_id)s, %(tenant_id)s, %(conversation_id)s, %(next_sequence)s, %(round_count)s, %(created_at)s,
        %(created_at)s)

-- eval_insert_message --
-- Evaluation ingestion: one stored turn.
INSERT INTO messages (user_id, tenant_id, conversation_id, sequence_number, round_number, role, content, message,
                      created_at)
VALUES (%(user_id)s, %(tenant_id)s, %(conversation_id)s, %(sequence_number)s, %(round_number)s, %(role)s,
        %(content)s, %(message)s, %(created_at)s)

-- eval_close_item --
-- Evaluation ingestion: a new value of a single-valued key closes the current one at `now`.
UPDATE items SET valid_during = tstzrange(lower(valid_during), %(now)s)
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND project = '' AND environment = ''
  AND item_type = %(item_type)s AND key = %(key)s AND value_slot = %(value_slot)s
  AND upper_inf(valid_during) AND lower(valid_during) < %(now)s AND content_norm <> %(content_norm)s

-- eval_insert_item --
-- Evaluation ingestion: one item (or cluster summary), unless the same content is current in its slot.
INSERT INTO items (user_id, tenant_id, item_type, key, value_slot, content, content_norm, importance, valid_during,
                   is_summary, source_item_ids)
SELECT %(user_id)s, %(tenant_id)s, %(item_type)s, %(key)s, %(value_slot)s, %(content)s, %(content_norm)s,
       %(importance)s, tstzrange(%(valid_from)s, %(valid_to)s), %(is_summary)s, %(source_item_ids)s
WHERE NOT EXISTS (SELECT 1 FROM items WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s
                  AND project = '' AND environment = '' AND item_type = %(item_type)s AND key = %(key)s
                  AND value_slot = %(value_slot)s AND content_norm = %(content_norm)s AND upper_inf(valid_during))
RETURNING item_id

-- eval_insert_item_source --
-- Evaluation ingestion: a turn an item came from.
INSERT INTO item_sources (user_id, tenant_id, item_id, conversation_id, memory_id, sequence_number)
VALUES (%(user_id)s, %(tenant_id)s, %(item_id)s, %(conversation_id)s, NULL, %(sequence_number)s)
ON CONFLICT DO NOTHING
