-- Named queries of recall's date boost (memory_agent/long_term/recall/dated.py). Each block starts with
-- `-- name --` and a one-line description; every statement runs with search_path set to the memory_agent schema.

-- recall_dated_turns --
-- The user's turns (user and assistant messages) stored in [span_start, span_end), the ones sharing most of the
-- query's words first (full text in `config`, any word), then the latest; at most `candidates`, each with its
-- neighbours as recall_search gives a turn. `as_of`: stored by then. {message_fts}: a turn's full-text vector, as in
-- recall_search (the stored 'english' column, or computed in `config`). Texts as far as the block shows them
-- (`text_chars`, `neighbour_chars`: one more than it keeps), as recall_search reads them; a turn that asks a
-- question with its reply, as recall_search gives it.
WITH words AS (
    SELECT CASE WHEN count(*) = 0 THEN NULL
                ELSE to_tsquery(%(config)s::regconfig, string_agg(quote_literal(w.word), ' | ')) END AS query
    FROM unnest(tsvector_to_array(to_tsvector(%(config)s::regconfig, %(query)s))) AS w (word)
), dated AS (
    SELECT m.conversation_id, m.sequence_number, m.role, substr(m.content, 1, %(text_chars)s) AS content, m.created_at,
           coalesce(ts_rank({message_fts}, words.query), 0) AS rank
    FROM messages AS m, words
    WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s AND m.role IN ('user', 'assistant')
      AND m.created_at >= %(span_start)s::timestamptz AND m.created_at < %(span_end)s::timestamptz
      AND (%(as_of)s::timestamptz IS NULL OR m.created_at <= %(as_of)s::timestamptz)
    ORDER BY rank DESC, m.created_at DESC, m.conversation_id, m.sequence_number
    LIMIT %(candidates)s
)
SELECT 'turn' AS kind, d.rank::float8 AS score, ARRAY['date'] AS paths, d.conversation_id, d.sequence_number,
       d.role, d.content AS text, d.created_at, nb.neighbours,
       rp.sequence_number AS reply_sequence, rp.role AS reply_role, rp.text AS reply_text,
       rp.created_at AS reply_created_at, rnb.neighbours AS reply_neighbours
FROM dated AS d
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_array(b.sequence_number, b.role, substr(b.content, 1, %(neighbour_chars)s))
                     ORDER BY b.sequence_number) AS neighbours
    FROM messages AS b
    WHERE b.user_id = %(user_id)s AND b.tenant_id = %(tenant_id)s AND b.conversation_id = d.conversation_id
      AND b.sequence_number BETWEEN d.sequence_number - %(neighbours_before)s
                                AND d.sequence_number + %(neighbours_after)s
      AND b.sequence_number <> d.sequence_number AND b.role IN ('user', 'assistant')
      AND (%(as_of)s::timestamptz IS NULL OR b.created_at <= %(as_of)s::timestamptz)
) AS nb ON true
LEFT JOIN LATERAL (
    -- A turn that ends with a question: its reply, as recall_search reads it (replies.py decides).
    SELECT r.sequence_number, r.role, substr(r.content, 1, %(text_chars)s) AS text, r.created_at
    FROM messages AS r
    WHERE char_length(d.content) < %(text_chars)s AND d.content ~ '[?？][^[:alnum:]]*$'
      AND r.user_id = %(user_id)s AND r.conversation_id = d.conversation_id
      AND r.sequence_number > d.sequence_number
      AND r.tenant_id = %(tenant_id)s AND r.role IN ('user', 'assistant') AND r.content <> ''
      AND (%(as_of)s::timestamptz IS NULL OR r.created_at <= %(as_of)s::timestamptz)
    ORDER BY r.sequence_number
    LIMIT 1
) AS rp ON rp.role <> d.role
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_array(b.sequence_number, b.role, substr(b.content, 1, %(neighbour_chars)s))
                     ORDER BY b.sequence_number) AS neighbours
    FROM messages AS b
    WHERE rp.sequence_number IS NOT NULL AND b.user_id = %(user_id)s AND b.tenant_id = %(tenant_id)s
      AND b.conversation_id = d.conversation_id
      AND b.sequence_number BETWEEN rp.sequence_number - %(neighbours_before)s
                                AND rp.sequence_number + %(neighbours_after)s
      AND b.sequence_number <> rp.sequence_number AND b.role IN ('user', 'assistant')
      AND (%(as_of)s::timestamptz IS NULL OR b.created_at <= %(as_of)s::timestamptz)
) AS rnb ON true
ORDER BY d.rank DESC, d.created_at DESC, d.conversation_id, d.sequence_number
