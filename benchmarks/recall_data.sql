-- Data of the recall benchmark stage (benchmarks/recall.py), generated in the server.

-- recall_bench_conversations --
-- `conversations` conversations of `turns` messages for every user of tenant 'bench', with their owner rows.
WITH owners AS (
    INSERT INTO conversation_owners (conversation_id, tenant_id, user_id)
    SELECT u || ':c' || c, 'bench', u
    FROM unnest(%(users)s::text[]) AS u, generate_series(1, %(conversations)s) AS c
    RETURNING conversation_id, tenant_id, user_id
)
INSERT INTO conversations (user_id, tenant_id, conversation_id, next_sequence, round_count)
SELECT user_id, tenant_id, conversation_id, %(turns)s, (%(turns)s + 1) / 2
FROM owners

-- recall_bench_messages --
-- Alternating user/assistant turns of 8-20 words, word k of the vocabulary drawn with probability ~1/(k + 100)
-- (Zipf-Mandelbrot: the head of real text is function words, which the text-search configuration drops).
INSERT INTO messages (user_id, tenant_id, conversation_id, sequence_number, round_number, role, content, message,
                      created_at)
SELECT u, 'bench', u || ':c' || c, s, s / 2 + 1, CASE WHEN mod(s, 2) = 0 THEN 'user' ELSE 'assistant' END, body.text,
       jsonb_build_object('type', 'human', 'data', jsonb_build_object('content', body.text)),
       now() - make_interval(days => %(conversations)s - c, secs => %(turns)s - s)
FROM unnest(%(users)s::text[]) AS u, generate_series(1, %(conversations)s) AS c,
     generate_series(0, %(turns)s - 1) AS s,
     LATERAL (
         SELECT string_agg(w.words[greatest(1, floor(101 * power((cardinality(w.words) + 100) / 101.0, random()))::int - 100)], ' ') AS text
         FROM (SELECT %(vocabulary)s::text[] AS words) AS w, generate_series(1, 8 + mod(s * 7 + c, 13)) AS n
         WHERE s >= 0
     ) AS body

-- recall_bench_items --
-- `items` current items (a key each) for every user, one in ten a cluster summary, each with one source turn.
WITH made AS (
    INSERT INTO items (user_id, tenant_id, item_type, key, value_slot, content, content_norm, importance,
                       valid_during, is_summary)
    SELECT u, 'bench', (ARRAY['fact', 'preference', 'decision', 'todo', 'entity'])[1 + mod(n, 5)],
           'key_' || n, CASE WHEN mod(n, 10) = 0 THEN 'summary' ELSE '' END, body.text, lower(body.text), 0.5,
           tstzrange(now() - interval '30 days', NULL), mod(n, 10) = 0
    FROM unnest(%(users)s::text[]) AS u, generate_series(1, %(items)s) AS n,
         LATERAL (
             SELECT 'The user ' || string_agg(w.words[greatest(1, floor(101 * power((cardinality(w.words) + 100) / 101.0, random()))::int - 100)], ' ')
                 AS text
             FROM (SELECT %(vocabulary)s::text[] AS words) AS w, generate_series(1, 6 + mod(n, 7)) AS k
             WHERE n > 0
         ) AS body
    RETURNING user_id, tenant_id, item_id
)
INSERT INTO item_sources (user_id, tenant_id, item_id, conversation_id, memory_id, sequence_number)
SELECT user_id, tenant_id, item_id, user_id || ':c' || (1 + mod(item_id, %(conversations)s)), NULL,
       mod(item_id, %(turns)s)
FROM made

-- recall_bench_notes --
-- Two years of weekly and monthly consolidation notes for every user (104 + 24), five key insights each, drawn
-- like the turns: recall reads their key insights.
INSERT INTO consolidation_notes (user_id, tenant_id, period, period_start, period_end, content, consolidated,
                                 key_insights, key_insights_text, notes_consolidated, model, created_at)
SELECT u, 'bench', p.period, p.start, p.start + p.days - 1, body.text, body.text, body.insights,
       array_to_string(body.insights, E'\n'), 7, 'bench', p.start + p.days
FROM unnest(%(users)s::text[]) AS u,
     LATERAL (SELECT 'weekly' AS period, (current_date - 7 * w)::date AS start, 7 AS days
              FROM generate_series(1, 104) AS w
              UNION ALL
              SELECT 'monthly', (date_trunc('month', current_date) - make_interval(months => m))::date, 28
              FROM generate_series(1, 24) AS m) AS p,
     LATERAL (
         SELECT array_agg(insight) AS insights, string_agg(insight, ' ') AS text
         FROM (SELECT 'The user ' || string_agg(w.words[greatest(1, floor(101 * power((cardinality(w.words) + 100) / 101.0, random()))::int - 100)], ' ') AS insight
               FROM (SELECT %(vocabulary)s::text[] AS words) AS w, generate_series(1, 5) AS k,
                    generate_series(1, 10) AS n
               WHERE p.start IS NOT NULL AND u IS NOT NULL
               GROUP BY k) AS one
     ) AS body

-- recall_bench_embeddings --
-- A vector for every item near the model's vector of an everyday passage (`base`, each component moved at random
-- by up to ±spread/2): latency only, the vectors carry no meaning, but like a real model's they all lie within
-- the similarity floor of a query (e5's cosines are all above 0.7), so the vector path ranks and joins all of them
-- as it would in use. Random directions would lie at cosine ~0 and the floor would drop nearly every one.
INSERT INTO item_embeddings (user_id, tenant_id, item_id, model, embedding)
SELECT i.user_id, i.tenant_id, i.item_id, %(model)s,
       (SELECT array_agg(b + (random() - 0.5) * %(spread)s ORDER BY k)
        FROM unnest(%(base)s::float4[]) WITH ORDINALITY AS x (b, k) WHERE i.item_id IS NOT NULL)::vector
FROM items AS i

-- recall_bench_turn_embeddings --
-- A vector for every user and assistant turn (as the background job writes them), drawn as the items' are.
INSERT INTO message_embeddings (user_id, tenant_id, conversation_id, sequence_number, model, embedding)
SELECT m.user_id, m.tenant_id, m.conversation_id, m.sequence_number, %(model)s,
       (SELECT array_agg(b + (random() - 0.5) * %(spread)s ORDER BY k)
        FROM unnest(%(base)s::float4[]) WITH ORDINALITY AS x (b, k) WHERE m.sequence_number IS NOT NULL)::vector
FROM messages AS m
WHERE m.role IN ('user', 'assistant')

-- recall_bench_analyze --
-- The state autovacuum leaves a table in: statistics, visibility map, hint bits (a first read after a bulk load
-- writes every page it touches).
VACUUM ANALYZE
