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
), in_span AS NOT MATERIALIZED (
    SELECT m.conversation_id, m.sequence_number, m.created_at, {message_fts} AS fts
    FROM messages AS m
    WHERE m.user_id = %(user_id)s AND m.tenant_id = %(tenant_id)s AND m.role IN ('user', 'assistant')
      AND NOT starts_with(m.user_id, 'conversation:')  -- as recall_search's user_turns (the indexes' condition)
      AND m.created_at >= %(span_start)s::timestamptz AND m.created_at < %(span_end)s::timestamptz
      AND (%(as_of)s::timestamptz IS NULL OR m.created_at <= %(as_of)s::timestamptz)
), picked AS (
    -- Only the turns that hold a word of the query are ranked (ts_rank on every turn of a long span cost ~1 µs a
    -- turn, and a year of a busy user's turns is tens of thousands), and the latest `candidates` of the span beside
    -- them: between them they hold the first `candidates` of the span in this order (a turn without a query word
    -- ranks 0, and those are taken latest first).
    SELECT s.conversation_id, s.sequence_number, s.created_at, ts_rank(s.fts, words.query) AS rank
    FROM in_span AS s, words
    WHERE s.fts @@ words.query
    UNION
    SELECT l.conversation_id, l.sequence_number, l.created_at, 0
    FROM (SELECT s.conversation_id, s.sequence_number, s.created_at
          FROM in_span AS s
          ORDER BY s.created_at DESC, s.conversation_id, s.sequence_number
          LIMIT %(candidates)s) AS l
), dated AS (
    SELECT p.conversation_id, p.sequence_number, m.role, substr(m.content, 1, %(text_chars)s) AS content, p.created_at,
           p.rank
    FROM (SELECT p.conversation_id, p.sequence_number, p.created_at, max(p.rank) AS rank
          FROM picked AS p
          GROUP BY p.conversation_id, p.sequence_number, p.created_at
          ORDER BY 4 DESC, p.created_at DESC, p.conversation_id, p.sequence_number
          LIMIT %(candidates)s) AS p
    JOIN messages AS m
      ON m.user_id = %(user_id)s AND m.conversation_id = p.conversation_id AND m.sequence_number = p.sequence_number
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
