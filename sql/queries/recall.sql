-- Named queries of recall (memory_agent/long_term/recall/search.py and long_term/embeddings.py).
-- Every statement runs with search_path set to the memory_agent schema. `recall_search` has placeholders:
-- {vector_hits}, filled with `recall_vector_hits` when an embedder is configured and `recall_no_vector_hits`
-- otherwise (the embeddings table exists only where pgvector does); {message_fts}, {item_fts}, {note_fts},
-- {batch_fts}: the stored 'english' vectors or vectors computed in the configured one.

-- recall_settings --
-- For recall's transaction: the word similarity a trigram hit needs (the operator's index reads it), and the plan
-- cache mode. With the stored 'english' vectors the statement has no configuration-dependent expression, so one
-- generic plan per connection serves every call (planning was ~1.5 ms of a ~4 ms recall); with any other
-- configuration the configuration must be a constant for the planner to match the expression index, hence
-- custom plans. And the tenant row-level security filters by: recall reads the items, summaries and notes of the
-- tenant it was asked for, whichever role runs it (a role bound by the policies saw turns only without it).
-- On Citus (its catalog present) plans are made with the values: it plans a statement with unresolved parameters
-- only when it is simple.
SELECT set_config('pg_trgm.word_similarity_threshold', %(threshold)s, true),
       set_config('plan_cache_mode',
                  CASE WHEN to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN %(plan_cache_mode)s
                       ELSE 'force_custom_plan' END, true),
       set_config('memory_agent.tenant_id', %(tenant_id)s, true)

-- recall_search --
-- One user's candidates from every retrieval path (full text, trigrams, vectors, recent), fused by reciprocal rank:
-- turns, items and cluster summaries, the key insights of weekly and monthly consolidation notes, and batch
-- summaries.
WITH user_turns AS NOT MATERIALIZED (
    -- The one place turns are scoped to a user: every conversation of theirs (the messages key leads with
    -- user_id), in their tenant. A named user's: the text-search indexes hold no others (0030), and the
    -- planner uses them when this condition is theirs, word for word.
    SELECT m.conversation_id, m.sequence_number, m.role, m.content, m.created_at, m.has_cjk,
           m.message -> 'data' ->> 'name' AS name, {message_fts} AS fts
    FROM messages AS m
    WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s AND NOT starts_with(m.user_id, 'conversation:')
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
), user_batches AS NOT MATERIALIZED (
    -- Batch summaries of the user's old items (kept forever; the retention pass forgets their originals).
    -- Written by then, with `as_of`.
    SELECT b.summary_id, b.content, b.has_cjk, {batch_fts} AS fts
    FROM batch_summaries AS b
    WHERE b.user_id = %(user_id)s AND b.tenant_id = %(tenant_id)s
      AND (%(as_of)s::timestamptz IS NULL OR b.created_at <= %(as_of)s::timestamptz)
), lexemes AS MATERIALIZED (
    -- The query's lexemes (stop words of the configuration dropped, stemmed), each a term of its own, with the
    -- other forms of its irregular words (`fts_query`: "met" brings "meet", query_text.py): a long one as a prefix
    -- of all but its last two characters, at least 6 ("allergies" → allergi, "allergic" → allerg: allerg:*);
    -- 5 collided ("undergo" → under:* matched "understand"). With AND-ed terms (or_terms false), one term.
    SELECT CASE WHEN length(l.lexeme) >= 6
                THEN (quote_literal(left(l.lexeme, greatest(6, length(l.lexeme) - 2))) || ':*')::tsquery
                ELSE quote_literal(l.lexeme)::tsquery END AS q
    FROM unnest(tsvector_to_array(to_tsvector(%(config)s::regconfig, %(fts_query)s))) AS l (lexeme)
    WHERE %(or_terms)s AND strpos(l.lexeme, E'\\') = 0
    UNION ALL
    SELECT plainto_tsquery(%(config)s::regconfig, %(query)s)
    WHERE NOT %(or_terms)s AND numnode(plainto_tsquery(%(config)s::regconfig, %(query)s)) > 0
), terms AS (
    -- Every term OR-ed (AND-ed: a question repeats few of the words of the turn that answers it): the index's query.
    SELECT (SELECT string_agg(l.q::text, ' | ') FROM lexemes AS l)::tsquery AS q
), matches AS MATERIALIZED (
    -- Every row of the user that matches a term: the corpus statistics below are read from it.
    SELECT 'turn' AS kind, t.conversation_id, t.sequence_number, (NULL::items).item_id, t.fts, t.name
    FROM user_turns AS t
    WHERE %(use_fts)s AND t.fts @@ (SELECT q FROM terms)
    UNION ALL
    SELECT 'item', NULL, NULL, i.item_id, i.fts, NULL
    FROM user_items AS i
    WHERE %(use_fts)s AND i.fts @@ (SELECT q FROM terms)
    UNION ALL
    -- A batch summary: item_id holds its summary id.
    SELECT 'batch', NULL, NULL, b.summary_id, b.fts, NULL
    FROM user_batches AS b
    WHERE %(use_fts)s AND b.fts @@ (SELECT q FROM terms)
    UNION ALL
    -- A key insight: its note (item_id holds the note id) and its place in key_insights (sequence_number).
    -- The note's index finds the notes; the insights of the 4 best-matching ones (newest first among equals)
    -- are matched one by one: vectorizing every insight of every matching note cost 0.6 ms for a common word.
    SELECT 'insight', NULL, k.ordinal::integer, n.note_id, to_tsvector(%(config)s::regconfig, left(k.insight, 100000)),
           NULL
    FROM (SELECT b.note_id, b.key_insights
          FROM user_notes AS b
          WHERE %(use_fts)s AND b.fts @@ (SELECT q FROM terms)
          ORDER BY ts_rank(b.fts, (SELECT q FROM terms)) DESC, b.period_start DESC
          LIMIT 4) AS n
    CROSS JOIN LATERAL unnest(n.key_insights) WITH ORDINALITY AS k (insight, ordinal)
    WHERE to_tsvector(%(config)s::regconfig, left(k.insight, 100000)) @@ (SELECT q FROM terms)
), corpus AS MATERIALIZED (
    -- How many turns the user has (their conversations' sequences: no scan of the turns) and the mean length of
    -- the matching rows, for BM25.
    SELECT greatest((SELECT coalesce(sum(c.next_sequence), 0) FROM conversations AS c
                     WHERE c.user_id = %(user_id)s AND c.tenant_id = %(tenant_id)s),
                    (SELECT count(*) FROM matches), 1)::float8 AS n,
           greatest((SELECT avg(length(m.fts)) FROM matches AS m), 1)::float8 AS avg_length
), weights AS MATERIALIZED (
    -- A term's inverse document frequency (BM25's): a word in half the user's turns (their own name, "today")
    -- weighs little beside a rare one. ts_rank has no such weight: its ranking let common words decide. A term in
    -- more than a quarter of a user's turns (a speaker's name: every turn of theirs holds it) is `common`: it adds
    -- to a row's score but does not match a row alone.
    SELECT l.q, d.df, ln(1 + (c.n - d.df + 0.5) / (d.df + 0.5)) AS idf, c.n >= 20 AND d.df > 0.25 * c.n AS common
    FROM lexemes AS l, corpus AS c,
         LATERAL (SELECT count(*)::float8 AS df FROM matches AS m WHERE m.fts @@ l.q) AS d
), rare AS MATERIALIZED (
    -- The query's terms that match rows and are not common: when there are some, a row must hold one of them.
    SELECT w.q FROM weights AS w WHERE NOT w.common AND w.df > 0
), scored AS MATERIALIZED (
        -- BM25 with a term counted once per row (a chat turn rarely repeats a word): the weights of the terms a
        -- row holds, normalized by its length against the matching rows' mean, a length under half of the mean
        -- counted as half of it: a very short turn ("Same here!", "Bye!") does not outrank one with content for
        -- being short. k1 1.2, and b (how much length counts) 0.3, not the usual 0.75: chat turns are short and a
        -- longer one is the one that tells something (docs/measurements/recall.md: b from 0.2 to 0.4 gained at
        -- every k, 0.75 and 0.9 were the lowest).
        SELECT m.kind, m.conversation_id, m.sequence_number, m.item_id, m.name,
               (SELECT sum(w.idf) FROM weights AS w WHERE m.fts @@ w.q) * 2.2
                   / (1 + 1.2 * (0.7 + 0.3 * greatest(length(m.fts), 0.5 * c.avg_length) / c.avg_length)) AS score
        FROM matches AS m, corpus AS c
        WHERE NOT EXISTS (SELECT 1 FROM rare) OR EXISTS (SELECT 1 FROM rare AS r WHERE m.fts @@ r.q)
        ORDER BY 6 DESC
        LIMIT %(candidates)s * 2
), speakers AS MATERIALIZED (
    -- The speakers (a message's `name`) of the best-scored turns, and whether the query names one of them (every
    -- word of the name a word of the query).
    SELECT s.name, to_tsvector('simple', %(query)s) @@ plainto_tsquery('simple', s.name) AS named
    FROM (SELECT DISTINCT h.name FROM scored AS h WHERE h.name <> '') AS s
    WHERE numnode(plainto_tsquery('simple', s.name)) > 0
), fts AS (
    -- Where several people speak and the query names one of them, that speaker's turns first: a question about
    -- what one of two people said or did is most often answered by their own turns, not the turns that address
    -- them (docs/measurements/recall.md). A user talking to an assistant with no name has one speaker: no change.
    SELECT kind, conversation_id, sequence_number, item_id,
           row_number() OVER (ORDER BY score DESC, sequence_number DESC) AS rank, score::float8 AS raw
    FROM (
        SELECT h.kind, h.conversation_id, h.sequence_number, h.item_id,
               h.score * CASE WHEN (SELECT count(*) FROM speakers) >= 2
                                   AND h.name IN (SELECT p.name FROM speakers AS p WHERE p.named)
                              THEN %(speaker_boost)s ELSE 1.0 END AS score
        FROM scored AS h
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
    -- trigram, so those are read from the user's rows (strpos: no index would serve them). Each text is matched
    -- by its first 10,000 characters (0027; substr reads no more of a stored text than that): trigram matching
    -- costs each candidate's length, and a user's 50 MB turn took a minute of every recall that fell back here.
    SELECT 'turn' AS kind, t.conversation_id, t.sequence_number, (NULL::items).item_id,
           substr(t.content, 1, 10000) AS content
    FROM user_turns AS t
    WHERE (SELECT open FROM trgm_gate) AND (SELECT %(query)s::text) <%% substr(t.content, 1, 10000)
    UNION
    SELECT 'turn', t.conversation_id, t.sequence_number, (NULL::items).item_id, substr(t.content, 1, 10000)
    FROM user_turns AS t
    WHERE cardinality(%(bigrams)s::text[]) > 0 AND (SELECT open FROM trgm_gate) AND t.has_cjk
      AND EXISTS (SELECT 1 FROM unnest((SELECT %(bigrams)s::text[])) AS b
                  WHERE strpos(substr(t.content, 1, 10000), b) > 0)
    UNION
    SELECT 'item', NULL, NULL, i.item_id, substr(i.content, 1, 10000)
    FROM user_items AS i
    WHERE (SELECT open FROM trgm_gate) AND (SELECT %(query)s::text) <%% substr(i.content, 1, 10000)
    UNION
    SELECT 'item', NULL, NULL, i.item_id, substr(i.content, 1, 10000)
    FROM user_items AS i
    WHERE cardinality(%(bigrams)s::text[]) > 0 AND (SELECT open FROM trgm_gate) AND i.has_cjk
      AND EXISTS (SELECT 1 FROM unnest((SELECT %(bigrams)s::text[])) AS b
                  WHERE strpos(substr(i.content, 1, 10000), b) > 0)
    UNION
    SELECT 'batch', NULL, NULL, b.summary_id, substr(b.content, 1, 10000)
    FROM user_batches AS b
    WHERE (SELECT open FROM trgm_gate) AND (SELECT %(query)s::text) <%% substr(b.content, 1, 10000)
    UNION
    SELECT 'batch', NULL, NULL, b.summary_id, substr(b.content, 1, 10000)
    FROM user_batches AS b
    WHERE cardinality(%(bigrams)s::text[]) > 0 AND (SELECT open FROM trgm_gate) AND b.has_cjk
      AND EXISTS (SELECT 1 FROM unnest((SELECT %(bigrams)s::text[])) AS x
                  WHERE strpos(substr(b.content, 1, 10000), x) > 0)
    UNION
    -- CJK key insights by their bigrams (a user has a few weekly and monthly notes: read through their key).
    SELECT 'insight', NULL, k.ordinal::integer, n.note_id, substr(k.insight, 1, 10000)
    FROM user_notes AS n
    CROSS JOIN LATERAL unnest(n.key_insights) WITH ORDINALITY AS k (insight, ordinal)
    WHERE cardinality(%(bigrams)s::text[]) > 0 AND (SELECT open FROM trgm_gate)
      AND EXISTS (SELECT 1 FROM unnest((SELECT %(bigrams)s::text[])) AS b
                  WHERE strpos(substr(k.insight, 1, 10000), b) > 0)
), trgm AS (
    SELECT kind, conversation_id, sequence_number, item_id,
           row_number() OVER (ORDER BY score DESC, sequence_number DESC) AS rank, score::float8 AS raw
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
           row_number() OVER (ORDER BY t.sequence_number DESC) AS rank, 0::float8 AS raw
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
           sum(CASE WHEN r.path = 'vector' THEN %(vector_weight)s ELSE 1.0 END / (%(rrf_k)s + r.rank)) AS score,
           array_agg(r.path ORDER BY r.path) AS paths,
           -- Each list's own score beside the ranks (`raw`: BM25, word similarity, cosine similarity): hybrid
           -- recall fuses full text with vectors by these scores (hybrid.reranked).
           max(r.raw) FILTER (WHERE r.path = 'fts') AS bm25,
           max(r.raw) FILTER (WHERE r.path = 'vector') AS similarity
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
SELECT counts.*, f.kind, f.score::float8 AS score, f.paths, f.bm25, f.similarity,
       f.conversation_id, f.sequence_number, f.item_id,
       coalesce(t.role, CASE WHEN i.is_summary THEN 'summary' ELSE i.item_type END, n.period,
                CASE WHEN bs.summary_id IS NOT NULL THEN 'batch summary' END) AS role,
       -- The text as far as the block shows it (`text_chars`, one more than it keeps: it then knows it cut it); a
       -- stored text is read no further (substr), whatever its length.
       substr(coalesce(t.content, i.content, n.key_insights[f.sequence_number], bs.content), 1, %(text_chars)s)
           AS text,
       coalesce(i.is_summary, n.note_id IS NOT NULL OR bs.summary_id IS NOT NULL) AS is_summary,
       coalesce(i.source_item_ids, bs.summarized_ids) AS source_item_ids, i.item_type, i.key,
       lower(i.valid_during) AS valid_from,
       coalesce(t.created_at, lower(i.valid_during), n.created_at, bs.created_at) AS created_at,
       n.note_id, n.period, n.period_start,
       bs.summary_id AS batch_summary_id, bs.summarized_from, bs.summarized_until,
       src.sources, nb.neighbours,
       rp.sequence_number AS reply_sequence, rp.role AS reply_role, rp.text AS reply_text,
       rp.created_at AS reply_created_at, rnb.neighbours AS reply_neighbours
FROM counts
LEFT JOIN fused AS f ON true
LEFT JOIN messages AS t
       ON f.kind = 'turn' AND t.user_id = %(user_id)s AND t.conversation_id = f.conversation_id
      AND t.sequence_number = f.sequence_number
LEFT JOIN items AS i ON f.kind = 'item' AND i.user_id = %(user_id)s AND i.item_id = f.item_id
LEFT JOIN consolidation_notes AS n ON f.kind = 'insight' AND n.user_id = %(user_id)s AND n.note_id = f.item_id
LEFT JOIN batch_summaries AS bs ON f.kind = 'batch' AND bs.user_id = %(user_id)s AND bs.summary_id = f.item_id
LEFT JOIN LATERAL (
    -- Provenance: the turns an item came from; for a cluster summary, also those of its source items; for a
    -- batch summary, those of the summarized items not forgotten yet (their ids stay in source_item_ids).
    SELECT jsonb_agg(DISTINCT jsonb_build_array(s.conversation_id, s.sequence_number)) AS sources
    FROM item_sources AS s
    WHERE f.kind IN ('item', 'batch') AND s.user_id = %(user_id)s AND s.tenant_id = %(tenant_id)s
      AND ((f.kind = 'item' AND s.item_id = f.item_id)
           OR s.item_id = ANY(coalesce(i.source_item_ids, bs.summarized_ids)))
      AND s.conversation_id IS NOT NULL AND s.sequence_number IS NOT NULL
) AS src ON true
-- The hit as a turn (a row of another kind is none: its turn context is empty), for the turn context below.
LEFT JOIN LATERAL (
    SELECT f.kind = 'turn' AS is_turn, f.conversation_id, f.sequence_number, t.role,
           substr(t.content, 1, %(text_chars)s) AS text
) AS h ON true
{turn_context}
ORDER BY f.score DESC NULLS LAST,
         coalesce(i.is_summary, n.note_id IS NOT NULL OR bs.summary_id IS NOT NULL) DESC NULLS LAST, f.kind,
         f.sequence_number

-- recall_turn_context --
-- A turn hit's context, for recall_search and recall_dated_turns: joined to their hit `h` (is_turn,
-- conversation_id, sequence_number, role, and its text as far as the block shows it, `text_chars`: one more than
-- it keeps). `nb`: its neighbours in its conversation (`neighbours_before` and `_after` turns), shown with it: a
-- question's answer is often the reply to the turn that matched it, or the turn it replied to. `rp`: for a turn
-- that ends with a question (as far as the block shows it, and no letter or digit after its last question mark),
-- the next turn of its conversation (a user or assistant message with text) when the other side said it, read as
-- the turn itself is; replies.py decides whether the hit is shown as this reply (a turn that says more than a
-- greeting before its question is not). A lookup by the messages' key, from the question on. `rnb`: the reply's
-- neighbours, as a turn's. Texts as far as the block shows them (`neighbour_chars`); `as_of`: stored by then.
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_array(b.sequence_number, b.role, substr(b.content, 1, %(neighbour_chars)s))
                     ORDER BY b.sequence_number) AS neighbours
    FROM messages AS b
    WHERE h.is_turn AND b.user_id = %(user_id)s AND b.tenant_id = %(tenant_id)s
      AND b.conversation_id = h.conversation_id
      AND b.sequence_number BETWEEN h.sequence_number - %(neighbours_before)s AND h.sequence_number + %(neighbours_after)s
      AND b.sequence_number <> h.sequence_number AND b.role IN ('user', 'assistant')
      AND (%(as_of)s::timestamptz IS NULL OR b.created_at <= %(as_of)s::timestamptz)
) AS nb ON true
LEFT JOIN LATERAL (
    SELECT r.sequence_number, r.role, substr(r.content, 1, %(text_chars)s) AS text, r.created_at
    FROM messages AS r
    WHERE h.is_turn AND char_length(h.text) < %(text_chars)s AND h.text ~ '[?？][^[:alnum:]]*$'
      AND r.user_id = %(user_id)s AND r.conversation_id = h.conversation_id
      AND r.sequence_number > h.sequence_number
      AND r.tenant_id = %(tenant_id)s AND r.role IN ('user', 'assistant') AND r.content <> ''
      AND (%(as_of)s::timestamptz IS NULL OR r.created_at <= %(as_of)s::timestamptz)
    ORDER BY r.sequence_number
    LIMIT 1
) AS rp ON rp.role <> h.role
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_array(b.sequence_number, b.role, substr(b.content, 1, %(neighbour_chars)s))
                     ORDER BY b.sequence_number) AS neighbours
    FROM messages AS b
    WHERE rp.sequence_number IS NOT NULL AND b.user_id = %(user_id)s AND b.tenant_id = %(tenant_id)s
      AND b.conversation_id = h.conversation_id
      AND b.sequence_number BETWEEN rp.sequence_number - %(neighbours_before)s
                                AND rp.sequence_number + %(neighbours_after)s
      AND b.sequence_number <> rp.sequence_number AND b.role IN ('user', 'assistant')
      AND (%(as_of)s::timestamptz IS NULL OR b.created_at <= %(as_of)s::timestamptz)
) AS rnb ON true

-- recall_message_fts_stored --
-- The full-text vector of a turn when the configuration is 'english': the stored column (and its index).
m.fts_english

-- recall_item_fts_stored --
-- The full-text vector of an item when the configuration is 'english': the stored column (and its index).
i.fts_english

-- recall_note_fts_stored --
-- The full-text vector of a note's key insights when the configuration is 'english': the stored column (0015).
n.key_insights_fts_english

-- recall_batch_fts_stored --
-- The full-text vector of a batch summary when the configuration is 'english': the stored column (0019).
b.fts_english

-- recall_message_fts_computed --
-- The full-text vector of a turn in any other configuration, computed (an expression index serves 'simple').
to_tsvector(%(config)s::regconfig, left(m.content, 100000))

-- recall_item_fts_computed --
-- The full-text vector of an item in any other configuration, computed (an expression index serves 'simple').
to_tsvector(%(config)s::regconfig, left(i.content, 100000))

-- recall_note_fts_computed --
-- The full-text vector of a note's key insights in any other configuration, computed.
to_tsvector(%(config)s::regconfig, left(n.key_insights_text, 100000))

-- recall_batch_fts_computed --
-- The full-text vector of a batch summary in any other configuration, computed.
to_tsvector(%(config)s::regconfig, left(b.content, 100000))

-- recall_vector_hits --
-- The vector path over all of a user's vectors: the user's nearest turns, items and summaries by cosine distance to
-- the query's vector, above a similarity floor. Run alone, after full text and trigrams, on every recall with an
-- embedder: search.py adds the hits only it found to theirs (hybrid.fused), or, when they found too little, fuses
-- the two lists by ranks as this statement with every path would (hybrid.with_nearest). Per user
-- (HNSW cannot filter by user before it ranks, and a user is a small part of the table), in two passes: the user's
-- compact vectors (0025: the signs of the vector minus its model's center) ranked by Hamming distance to the
-- query's, read from an index alone, keep each table's nearest 4 × candidates, ranked by their exact cosine
-- distances, computed once each (10 × candidates measured the same on the LoCoMo dev split, vectors alone, for
-- 2.5 ms more a recall on the bench's users). Vectors without a compact copy (stored before 0025, until the job
-- writes it) are ranked exactly (a model has its center before any copy is written: without one, every vector of
-- the model is such a vector). Only the nearest are joined to the current items and the user's turns (and checked
-- against `as_of`): joining every vector first cost an index lookup per vector, 15,000 for a user of the bench.
-- The query's compact form is computed once (a sub-select: a generic plan would compute it for every row). A list
-- may come out shorter when most of the nearest are items no longer current; it never holds one.
    SELECT kind, conversation_id, sequence_number, item_id,
           row_number() OVER (ORDER BY distance, kind DESC) AS rank, (1 - distance)::float8 AS raw
    FROM (
        SELECT %(vector_always)s
               OR (SELECT count(*) FROM (SELECT 1 FROM fts UNION ALL SELECT 1 FROM trgm) AS h) < %(min_hits)s AS open,
               (SELECT binary_quantize(%(query_vector)s::vector - v.center)
                FROM vector_centers AS v
                WHERE v.model = %(model)s AND vector_dims(v.center) = vector_dims(%(query_vector)s::vector))
                   AS query_bits
    ) AS vector_gate, LATERAL (
        SELECT 'item' AS kind, NULL AS conversation_id, NULL::integer AS sequence_number, i.item_id, e.distance
        FROM (
            SELECT e.item_id, e.embedding <=> %(query_vector)s::vector AS distance
            FROM (
                (SELECT c.item_id
                 FROM item_embeddings AS c
                 WHERE vector_gate.open
                   AND c.user_id = %(user_id)s AND c.tenant_id = %(tenant_id)s AND c.model = %(model)s
                   AND length(c.embedding_bits) = length(vector_gate.query_bits)
                 ORDER BY c.embedding_bits <~> vector_gate.query_bits
                 LIMIT %(candidates)s * 4)
                UNION ALL
                SELECT c.item_id
                FROM item_embeddings AS c
                WHERE vector_gate.open AND c.embedding_bits IS NULL
                  AND c.user_id = %(user_id)s AND c.tenant_id = %(tenant_id)s AND c.model = %(model)s
            ) AS c
            JOIN item_embeddings AS e ON e.user_id = %(user_id)s AND e.item_id = c.item_id
            WHERE vector_dims(e.embedding) = vector_dims(%(query_vector)s::vector)
            ORDER BY distance
            LIMIT %(candidates)s * 4
        ) AS e
        JOIN user_items AS i ON i.item_id = e.item_id
        WHERE e.distance <= 1 - %(vector_min_similarity)s
        UNION ALL
        SELECT 'turn', t.conversation_id, t.sequence_number, NULL, e.distance
        FROM (
            SELECT e.conversation_id, e.sequence_number, e.embedding <=> %(query_vector)s::vector AS distance
            FROM (
                (SELECT c.conversation_id, c.sequence_number
                 FROM message_embeddings AS c
                 WHERE vector_gate.open
                   AND c.user_id = %(user_id)s AND c.tenant_id = %(tenant_id)s AND c.model = %(model)s
                   AND length(c.embedding_bits) = length(vector_gate.query_bits)
                 ORDER BY c.embedding_bits <~> vector_gate.query_bits
                 LIMIT %(candidates)s * 4)
                UNION ALL
                SELECT c.conversation_id, c.sequence_number
                FROM message_embeddings AS c
                WHERE vector_gate.open AND c.embedding_bits IS NULL
                  AND c.user_id = %(user_id)s AND c.tenant_id = %(tenant_id)s AND c.model = %(model)s
            ) AS c
            JOIN message_embeddings AS e ON e.user_id = %(user_id)s AND e.conversation_id = c.conversation_id
               AND e.sequence_number = c.sequence_number
            WHERE vector_dims(e.embedding) = vector_dims(%(query_vector)s::vector)
            ORDER BY distance
            LIMIT %(candidates)s * 4
        ) AS e
        JOIN user_turns AS t ON t.conversation_id = e.conversation_id AND t.sequence_number = e.sequence_number
        WHERE e.distance <= 1 - %(vector_min_similarity)s
        ORDER BY distance
        LIMIT %(candidates)s
    ) AS nearest

-- recall_no_vector_hits --
-- No embedder configured (or no pgvector): the vector path is empty.
    SELECT 'item' AS kind, NULL AS conversation_id, NULL::integer AS sequence_number, (NULL::items).item_id,
           0::bigint AS rank, 0::float8 AS raw
    WHERE false

-- recall_vector_distances --
-- Hybrid recall when full text and trigrams found enough (search.py re-ranks their first hits with these, then
-- adds the hits only the vector path found, hybrid.fused): the
-- cosine distance to the query's vector of each hit's own vector, turns by their keys and items by their ids, above
-- the similarity floor. A lookup a hit: none of the user's other vectors is read. A stored vector of another
-- dimension than the query's (a model whose output size changed under the same name) has no distance: the CASE
-- computes one only for equal dimensions (a WHERE condition would not be sure to be checked first).
SELECT d.kind, d.conversation_id, d.sequence_number, d.item_id, d.distance
FROM (
    SELECT 'turn' AS kind, e.conversation_id, e.sequence_number, NULL::bigint AS item_id,
           CASE WHEN vector_dims(e.embedding) = vector_dims(%(query_vector)s::vector)
                THEN e.embedding <=> %(query_vector)s::vector END AS distance
    FROM unnest(%(conversation_ids)s::text[], %(sequences)s::integer[]) AS k (conversation_id, sequence_number)
    JOIN message_embeddings AS e
      ON e.user_id = %(user_id)s AND e.conversation_id = k.conversation_id AND e.sequence_number = k.sequence_number
    WHERE e.tenant_id = %(tenant_id)s AND e.model = %(model)s
    UNION ALL
    SELECT 'item', NULL, NULL, e.item_id,
           CASE WHEN vector_dims(e.embedding) = vector_dims(%(query_vector)s::vector)
                THEN e.embedding <=> %(query_vector)s::vector END
    FROM item_embeddings AS e
    WHERE e.user_id = %(user_id)s AND e.tenant_id = %(tenant_id)s AND e.item_id = ANY(%(item_ids)s::bigint[])
      AND e.model = %(model)s
) AS d
WHERE d.distance <= 1 - %(vector_min_similarity)s

-- items_to_embed --
-- Items and summaries of a user (current ones) that have no vector of `model` yet, oldest first, with the hash of
-- the text read (save_item_embedding writes the vector only while the item still holds that text).
SELECT i.item_id, i.content, md5(i.content) AS content_hash
FROM items AS i
WHERE i.tenant_id = %(tenant_id)s AND i.user_id = %(user_id)s AND upper_inf(i.valid_during)
  AND NOT EXISTS (SELECT 1 FROM item_embeddings AS e
                  WHERE e.user_id = i.user_id AND e.item_id = i.item_id AND e.model = %(model)s)
ORDER BY i.item_id
LIMIT %(batch)s

-- turns_to_embed --
-- Turns (user and assistant messages) of a user that have no vector of `model` made from the current text version
-- (`text_version`, 0028: a vector made the older way is made again), oldest first. A turn's vector is made from
-- the turn with the turn before it (embeddings.turn_passage): a short answer ("Yes! It was amazing") carries its
-- meaning in the turn it answers. Each with its speaker's name when the message has one, and the hashes of both
-- texts (save_turn_embedding writes the vector only while both rows still hold them); of the turn before, only its
-- last `context_chars` characters are read, and of the turn its first `turn_chars` (its hash is of its whole text).
SELECT m.conversation_id, m.sequence_number,
       left(coalesce((m.message -> 'data' ->> 'name') || ': ', '') || m.content, %(turn_chars)s) AS content,
       md5(coalesce((m.message -> 'data' ->> 'name') || ': ', '') || m.content) AS content_hash,
       p.name AS previous_name, right(p.content, %(context_chars)s) AS previous_tail,
       length(p.content) > %(context_chars)s AS previous_cut,
       md5(coalesce(p.name || ': ', '') || p.content) AS previous_hash
FROM messages AS m
LEFT JOIN LATERAL (
    SELECT b.message -> 'data' ->> 'name' AS name, b.content
    FROM messages AS b
    -- The user named as a value, not only through m: on Citus the statement is then routed to the user's shard (a
    -- lateral subquery correlated on the distribution column alone is a "complex join" it refuses).
    WHERE b.user_id = %(user_id)s AND b.user_id = m.user_id AND b.conversation_id = m.conversation_id
      AND b.sequence_number < m.sequence_number
      AND b.role IN ('user', 'assistant') AND b.content <> ''
    ORDER BY b.sequence_number DESC
    LIMIT 1
) AS p ON true
WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s AND m.role IN ('user', 'assistant')
  AND m.content <> ''
  AND NOT EXISTS (SELECT 1 FROM message_embeddings AS e
                  WHERE e.user_id = m.user_id AND e.conversation_id = m.conversation_id
                    AND e.sequence_number = m.sequence_number AND e.model = %(model)s
                    AND e.text_version = %(text_version)s)
ORDER BY m.created_at, m.conversation_id, m.sequence_number
LIMIT %(batch)s

-- save_turn_embedding --
-- One turn's vector and its compact copy (the signs of the vector minus the model's `center`; none without a
-- center of the vector's dimension), written only onto the turn whose text was embedded: the row at the key must
-- still hold the text of `content_hash`, and the turn before it the text of `previous_hash` (none before it: null).
-- The job embeds between transactions; an erasure (the caller holds share_forget_lock: one that committed
-- meanwhile is seen here) may have removed the turns, and a later round of the same thread id may have stored
-- other texts at the same keys: either writes nothing. The row is locked (FOR SHARE) so that it cannot change or
-- go before this transaction ends; the turn before goes only with it (turns are erased a conversation at a time).
-- A vector of another model or text version is replaced (a row per turn: the configured embedder's).
INSERT INTO message_embeddings (user_id, tenant_id, conversation_id, sequence_number, model, embedding, embedding_bits,
                                text_version)
SELECT m.user_id, m.tenant_id, m.conversation_id, m.sequence_number, %(model)s, %(embedding)s::vector,
       binary_quantize(%(embedding)s::vector - %(center)s::vector), %(text_version)s
FROM messages AS m
WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s AND m.conversation_id = %(conversation_id)s
  AND m.sequence_number = %(sequence_number)s
  AND md5(coalesce((m.message -> 'data' ->> 'name') || ': ', '') || m.content) = %(content_hash)s
  AND (SELECT md5(coalesce((b.message -> 'data' ->> 'name') || ': ', '') || b.content)
       FROM messages AS b
       WHERE b.user_id = %(user_id)s AND b.user_id = m.user_id AND b.conversation_id = m.conversation_id
         AND b.sequence_number < m.sequence_number AND b.role IN ('user', 'assistant') AND b.content <> ''
       ORDER BY b.sequence_number DESC
       LIMIT 1) IS NOT DISTINCT FROM %(previous_hash)s
FOR SHARE OF m
ON CONFLICT (user_id, conversation_id, sequence_number) DO UPDATE
    SET model = excluded.model, embedding = excluded.embedding, embedding_bits = excluded.embedding_bits,
        text_version = excluded.text_version

-- save_item_embedding --
-- One item's vector and its compact copy, as a turn's, written only while the item holds the text of
-- `content_hash`: an item forgotten meanwhile (or deleted by its cluster's refresh) is skipped, not a foreign-key
-- error that would cost the batch; a cluster summary rewritten in place gets its new text's vector at the next
-- indexing. A vector of another model is replaced (a row per item: the configured embedder's).
INSERT INTO item_embeddings (user_id, tenant_id, item_id, model, embedding, embedding_bits)
SELECT i.user_id, i.tenant_id, i.item_id, %(model)s, %(embedding)s::vector,
       binary_quantize(%(embedding)s::vector - %(center)s::vector)
FROM items AS i
WHERE i.user_id = %(user_id)s AND i.tenant_id = %(tenant_id)s AND i.item_id = %(item_id)s
  AND md5(i.content) = %(content_hash)s
FOR SHARE OF i
ON CONFLICT (user_id, item_id) DO UPDATE
    SET model = excluded.model, embedding = excluded.embedding, embedding_bits = excluded.embedding_bits

-- vector_center --
-- The center of a model's vectors (0025), as text; none before the model's first vectors are written.
SELECT center::text AS center FROM vector_centers WHERE model = %(model)s

-- save_vector_center --
-- A model's center, written once: the first writer's (every writer computes the same from the same reference
-- texts; the compact copies already written depend on the one kept).
INSERT INTO vector_centers (model, center) VALUES (%(model)s, %(center)s::vector) ON CONFLICT (model) DO NOTHING

-- fill_item_bits --
-- The compact copies a user's item vectors lack (stored before 0025), from the model's center.
UPDATE item_embeddings AS e
SET embedding_bits = binary_quantize(e.embedding - v.center)
FROM vector_centers AS v
WHERE e.user_id = %(user_id)s AND e.tenant_id = %(tenant_id)s AND e.model = %(model)s AND e.embedding_bits IS NULL
  AND v.model = e.model AND vector_dims(v.center) = vector_dims(e.embedding)

-- fill_turn_bits --
-- The compact copies a user's turn vectors lack (stored before 0025), from the model's center.
UPDATE message_embeddings AS e
SET embedding_bits = binary_quantize(e.embedding - v.center)
FROM vector_centers AS v
WHERE e.user_id = %(user_id)s AND e.tenant_id = %(tenant_id)s AND e.model = %(model)s AND e.embedding_bits IS NULL
  AND v.model = e.model AND vector_dims(v.center) = vector_dims(e.embedding)

-- users_to_embed --
-- Users with a current item or summary, or a turn (as turns_to_embed reads them), that has no vector of `model`
-- (a turn: none of the current `text_version`), or a vector of `model` without its compact copy (stored before 0025; once the model has a center), for the
-- periodic catch-up of indexing. `limit` of them, picked at random: users whose texts the embedder refuses stay
-- here, and in an order that stays the same run after run they would take every place.
SELECT u.tenant_id, u.user_id
FROM (
    SELECT i.tenant_id, i.user_id
    FROM items AS i
    WHERE upper_inf(i.valid_during)
      AND NOT EXISTS (SELECT 1 FROM item_embeddings AS e
                      WHERE e.user_id = i.user_id AND e.item_id = i.item_id AND e.model = %(model)s)
    UNION
    SELECT m.tenant_id, m.user_id
    FROM messages AS m
    WHERE m.role IN ('user', 'assistant') AND m.content <> ''
      AND NOT EXISTS (SELECT 1 FROM message_embeddings AS e
                      WHERE e.user_id = m.user_id AND e.conversation_id = m.conversation_id
                        AND e.sequence_number = m.sequence_number AND e.model = %(model)s
                        AND e.text_version = %(text_version)s)
    UNION
    SELECT e.tenant_id, e.user_id
    FROM item_embeddings AS e JOIN vector_centers AS v ON v.model = e.model
    WHERE e.model = %(model)s AND e.embedding_bits IS NULL AND vector_dims(v.center) = vector_dims(e.embedding)
    UNION
    SELECT e.tenant_id, e.user_id
    FROM message_embeddings AS e JOIN vector_centers AS v ON v.model = e.model
    WHERE e.model = %(model)s AND e.embedding_bits IS NULL AND vector_dims(v.center) = vector_dims(e.embedding)
) AS u
ORDER BY random()
LIMIT %(limit)s

-- delete_item_embedding --
-- The vector of one item (a cluster summary whose text was refreshed in place: the vector was the old text's).
DELETE FROM item_embeddings
WHERE user_id = %(user_id)s AND tenant_id = %(tenant_id)s AND item_id = %(item_id)s

-- vectors_available --
-- Whether the embeddings tables exist with their compact vectors (pgvector, 0.7 or later, was installed when the
-- migrations ran: 0009, 0018, 0025).
SELECT count(*) = 2 AS available
FROM pg_attribute
WHERE attname = 'embedding_bits' AND NOT attisdropped
  AND attrelid IN (to_regclass('item_embeddings'), to_regclass('message_embeddings'))

-- recall_source_turns --
-- The stored turns of one user a recalled hit came from, by (conversation_id, sequence_number) pairs, in order.
SELECT m.conversation_id, m.sequence_number, m.role, m.content, m.created_at
FROM unnest(%(conversation_ids)s::text[], %(sequences)s::integer[]) AS p (conversation_id, sequence_number)
JOIN messages AS m USING (conversation_id, sequence_number)
WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s
ORDER BY m.conversation_id, m.sequence_number

-- check_text_search_config --
-- At open: the text search configuration recall uses exists on the server (UndefinedObject when it does not).
SELECT %(config)s::regconfig AS config;
