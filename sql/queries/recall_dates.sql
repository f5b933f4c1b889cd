-- Named queries of recall's date boost (memory_agent/long_term/recall/dated.py). Each block starts with
-- `-- name --` and a one-line description; every statement runs with search_path set to the memory_agent schema.

-- recall_dated_turns --
-- The user's turns (user and assistant messages) stored in [span_start, span_end), the ones sharing most of the
-- query's words first (full text in `config`, any word), then the latest; at most `candidates`, each with its
-- neighbours as recall_search gives a turn. `as_of`: stored by then. {message_fts}: a turn's full-text vector, as in
-- recall_search (the stored 'english' column, or computed in `config`). Texts as far as the block shows them
-- (`text_chars`, `neighbour_chars`: one more than it keeps), as recall_search reads them; {turn_context}: the
-- neighbours, and a turn that asks a question with its reply, as recall_search gives them (recall_turn_context).
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
CROSS JOIN LATERAL (
    SELECT true AS is_turn, d.conversation_id, d.sequence_number, d.role, d.content AS text
) AS h
{turn_context}
ORDER BY d.rank DESC, d.created_at DESC, d.conversation_id, d.sequence_number
