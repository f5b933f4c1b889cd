-- Memory health at scale: what `memory-agent stats` and observability.health() run. Each block starts with
-- `-- name --` and a one-line description.
--
-- The views memory_health and memory_health_totals (migration 0003) answer the same questions for a reader in
-- psql, but computing memory_health for every conversation costs several index probes per conversation and
-- `stats` used to fetch all of it to keep twenty rows. Here each table is read once, in one aggregate pass:
-- round_metrics, memory, and the conversations, where the served memory of each is one index-only probe of
-- (conversation_id, status, end_sequence DESC) and the same pass picks the most lagging by ORDER BY ... LIMIT.
-- Only those get the per-conversation details (health_conversations). The three passes are independent, so
-- observability.health() runs them at once on separate connections and puts the totals row together in
-- memory_health_totals' column order. Stuck rows follow the timeout given (stuck_processing_after, the
-- reclaimer's rule), not a fixed 5 minutes; the totals' count of them is the number of rows that function
-- returns, which health() fetches anyway.

-- health_round_totals --
-- Every round_metrics row in one pass: rounds, fallback and truncation shares, chat-model context tokens.
SELECT count(*) AS rounds,
       round(avg((retrieval_path = 'raw')::int), 4) AS fallback_share,
       round(avg(truncated::int), 4) AS truncation_share,
       COALESCE(sum(context_tokens), 0) AS context_tokens
FROM round_metrics;

-- health_sort_memory --
-- For the rest of the transaction: memory for the percentile sorts, so that they do not spill to disk.
SELECT set_config('work_mem', %(work_mem)s, true);

-- health_summary_totals --
-- Every memory row in one pass: outcomes, failure rate, generation p50/p95 (one sort), tokens, compression, and
-- the structured rate (completed versions with at least one item in their five lists).
SELECT completed, failed, processing,
       round(failed::numeric / NULLIF(completed + failed, 0), 4) AS failure_rate,
       generation_ms[1] AS generation_p50_ms,
       generation_ms[2] AS generation_p95_ms,
       input_tokens, output_tokens,
       round(input_tokens::numeric / NULLIF(output_tokens, 0), 4) AS compression_ratio,
       round(structured::numeric / NULLIF(completed, 0), 4) AS structured_rate
FROM (
    SELECT count(*) FILTER (WHERE status = 'completed') AS completed,
           count(*) FILTER (WHERE status = 'failed') AS failed,
           count(*) FILTER (WHERE status = 'processing') AS processing,
           count(*) FILTER (WHERE status = 'completed' AND (items @? '$.facts[*]' OR items @? '$.preferences[*]'
               OR items @? '$.decisions[*]' OR items @? '$.todos[*]' OR items @? '$.entities[*]')) AS structured,
           COALESCE(sum(input_tokens) FILTER (WHERE status = 'completed'), 0) AS input_tokens,
           COALESCE(sum(output_tokens) FILTER (WHERE status = 'completed'), 0) AS output_tokens,
           percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY generation_time_ms)
               FILTER (WHERE status = 'completed') AS generation_ms
    FROM memory
) AS summaries;

-- health_lag_totals --
-- Every conversation in one pass: count, max and average summary lag, and the `limit` most lagging ids.
WITH conversation_lag AS MATERIALIZED (
    SELECT c.user_id, c.conversation_id, c.next_sequence - 1 - COALESCE(served.end_sequence, -1) AS summary_lag
    FROM conversations AS c
    LEFT JOIN LATERAL (
        SELECT m.end_sequence FROM memory AS m
        WHERE m.user_id = c.user_id AND m.conversation_id = c.conversation_id AND m.status = 'completed'
        ORDER BY m.end_sequence DESC
        LIMIT 1
    ) AS served ON true
)
SELECT count(*) AS conversations,
       max(summary_lag) AS max_summary_lag,
       round(avg(summary_lag), 2) AS avg_summary_lag,
       (SELECT COALESCE(array_agg(conversation_id ORDER BY summary_lag DESC, conversation_id, user_id), '{}')
        FROM (SELECT user_id, conversation_id, summary_lag FROM conversation_lag
              ORDER BY summary_lag DESC, conversation_id, user_id
              LIMIT %(limit)s) AS top) AS most_lagging,
       (SELECT COALESCE(array_agg(user_id ORDER BY summary_lag DESC, conversation_id, user_id), '{}')
        FROM (SELECT user_id, conversation_id, summary_lag FROM conversation_lag
              ORDER BY summary_lag DESC, conversation_id, user_id
              LIMIT %(limit)s) AS top) AS most_lagging_users
FROM conversation_lag;

-- health_conversations --
-- memory_health's columns for the conversations named, in the order given (stuck after a timeout in seconds).
WITH named AS (
    SELECT c.user_id, c.tenant_id, c.conversation_id, c.round_count, c.next_sequence, c.updated_at, named.position
    FROM unnest(%(user_ids)s::text[], %(conversation_ids)s::text[]) WITH ORDINALITY
         AS named (user_id, conversation_id, position)
    JOIN conversations AS c ON c.user_id = named.user_id AND c.conversation_id = named.conversation_id
), stuck AS (
    SELECT s.user_id, s.conversation_id, count(*) AS stuck
    FROM stuck_processing_after(make_interval(secs => %(stuck_after_s)s)) AS s
    GROUP BY s.user_id, s.conversation_id
)
SELECT n.conversation_id,
       n.round_count AS rounds,
       n.next_sequence - 1 AS newest_sequence,
       served.memory_id AS served_memory_id,
       served.end_sequence AS served_end_sequence,
       n.next_sequence - 1 - COALESCE(served.end_sequence, -1) AS summary_lag,
       n.round_count - COALESCE(served_round.round_number, 0) AS rounds_behind,
       now() - COALESCE(served.finished_at, served.created_at) AS served_memory_age,
       versions.completed,
       versions.failed,
       versions.processing,
       round(versions.failed::numeric / NULLIF(versions.completed + versions.failed, 0), 4) AS failure_rate,
       versions.input_tokens,
       versions.output_tokens,
       round(versions.input_tokens::numeric / NULLIF(versions.output_tokens, 0), 4) AS compression_ratio,
       COALESCE(stuck.stuck, 0) AS stuck,
       n.updated_at AS last_round_at,
       n.user_id,
       n.tenant_id
FROM named AS n
LEFT JOIN LATERAL (
    SELECT m.memory_id, m.end_sequence, m.finished_at, m.created_at
    FROM memory AS m
    WHERE m.user_id = n.user_id AND m.conversation_id = n.conversation_id AND m.status = 'completed'
    ORDER BY m.end_sequence DESC, m.memory_id DESC
    LIMIT 1
) AS served ON true
LEFT JOIN messages AS served_round
       ON served_round.user_id = n.user_id AND served_round.conversation_id = n.conversation_id
      AND served_round.sequence_number = served.end_sequence
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE m.status = 'completed') AS completed,
           count(*) FILTER (WHERE m.status = 'failed') AS failed,
           count(*) FILTER (WHERE m.status = 'processing') AS processing,
           COALESCE(sum(m.input_tokens) FILTER (WHERE m.status = 'completed'), 0) AS input_tokens,
           COALESCE(sum(m.output_tokens) FILTER (WHERE m.status = 'completed'), 0) AS output_tokens
    FROM memory AS m
    WHERE m.user_id = n.user_id AND m.conversation_id = n.conversation_id
) AS versions ON true
LEFT JOIN stuck ON stuck.user_id = n.user_id AND stuck.conversation_id = n.conversation_id
ORDER BY n.position;

-- health_model_stats --
-- Summaries per summarizer model (the columns of summary_model_stats), both percentiles from one sort.
SELECT model_name, summaries, completed, failed, failure_rate,
       generation_ms[1] AS generation_p50_ms,
       generation_ms[2] AS generation_p95_ms,
       avg_attempts, input_tokens, output_tokens, compression_ratio
FROM (
    SELECT m.model_name,
           count(*) AS summaries,
           count(*) FILTER (WHERE m.status = 'completed') AS completed,
           count(*) FILTER (WHERE m.status = 'failed') AS failed,
           round(count(*) FILTER (WHERE m.status = 'failed')::numeric / count(*), 4) AS failure_rate,
           percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY m.generation_time_ms)
               FILTER (WHERE m.status = 'completed') AS generation_ms,
           round(avg(m.attempts), 2) AS avg_attempts,
           COALESCE(sum(m.input_tokens) FILTER (WHERE m.status = 'completed'), 0) AS input_tokens,
           COALESCE(sum(m.output_tokens) FILTER (WHERE m.status = 'completed'), 0) AS output_tokens,
           round(sum(m.input_tokens) FILTER (WHERE m.status = 'completed')::numeric
                 / NULLIF(sum(m.output_tokens) FILTER (WHERE m.status = 'completed'), 0), 4) AS compression_ratio
    FROM memory AS m
    WHERE m.status <> 'processing'
    GROUP BY m.model_name
) AS per_model
ORDER BY summaries DESC, model_name;
