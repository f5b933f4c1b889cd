-- Memory health at scale: what `memory-agent stats` and observability.health() run. Each block starts with
-- `-- name --` and a one-line description.
--
-- The views memory_health and memory_health_totals (migration 0003) answer the same questions for a reader in
-- psql, but computing memory_health for every conversation costs several index probes per conversation and
-- `stats` used to fetch all of it to keep twenty rows. Here every figure is one aggregate pass: the served
-- memory of a conversation is one index-only probe of (conversation_id, status, end_sequence DESC), the worst
-- conversations are chosen by ORDER BY ... LIMIT in SQL, and only those get the per-conversation details.
-- Stuck rows follow the timeout given (the reclaimer's rule, stuck_processing_after), not a fixed 5 minutes.

-- health_totals --
-- Memory health of the whole database in one row (the columns of memory_health_totals), stuck after a timeout in seconds.
WITH summaries AS (
    SELECT count(*) FILTER (WHERE status = 'completed') AS completed,
           count(*) FILTER (WHERE status = 'failed') AS failed,
           count(*) FILTER (WHERE status = 'processing') AS processing,
           COALESCE(sum(input_tokens) FILTER (WHERE status = 'completed'), 0) AS input_tokens,
           COALESCE(sum(output_tokens) FILTER (WHERE status = 'completed'), 0) AS output_tokens,
           -- one sort for both percentiles
           percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY generation_time_ms)
               FILTER (WHERE status = 'completed') AS generation_ms
    FROM memory
), rounds AS (
    SELECT count(*) AS rounds,
           round(avg((retrieval_path = 'raw')::int), 4) AS fallback_share,
           round(avg(truncated::int), 4) AS truncation_share,
           COALESCE(sum(context_tokens), 0) AS context_tokens
    FROM round_metrics
), lag AS (
    SELECT count(*) AS conversations,
           max(c.next_sequence - 1 - COALESCE(served.end_sequence, -1)) AS max_summary_lag,
           round(avg(c.next_sequence - 1 - COALESCE(served.end_sequence, -1)), 2) AS avg_summary_lag
    FROM conversations AS c
    LEFT JOIN LATERAL (
        SELECT m.end_sequence FROM memory AS m
        WHERE m.conversation_id = c.conversation_id AND m.status = 'completed'
        ORDER BY m.end_sequence DESC
        LIMIT 1
    ) AS served ON true
), stuck AS (
    SELECT count(*) AS stuck FROM stuck_processing_after(make_interval(secs => %(stuck_after_s)s))
)
SELECT lag.conversations,
       rounds.rounds,
       summaries.completed,
       summaries.failed,
       summaries.processing,
       round(summaries.failed::numeric / NULLIF(summaries.completed + summaries.failed, 0), 4) AS failure_rate,
       lag.max_summary_lag,
       lag.avg_summary_lag,
       rounds.fallback_share,
       rounds.truncation_share,
       summaries.generation_ms[1] AS generation_p50_ms,
       summaries.generation_ms[2] AS generation_p95_ms,
       summaries.input_tokens,
       summaries.output_tokens,
       round(summaries.input_tokens::numeric / NULLIF(summaries.output_tokens, 0), 4) AS compression_ratio,
       rounds.context_tokens,
       round((summaries.input_tokens + summaries.output_tokens)::numeric
             / NULLIF(summaries.input_tokens + summaries.output_tokens + rounds.context_tokens, 0), 4)
           AS summary_token_share,
       stuck.stuck
FROM summaries, rounds, lag, stuck;

-- health_lagging_conversations --
-- The `limit` most lagging conversations with their memory_health columns (stuck after a timeout in seconds).
WITH lagging AS (
    -- Only what the order needs, for every conversation; the details below are read for `limit` rows.
    SELECT c.conversation_id, c.round_count, c.next_sequence, c.updated_at,
           c.next_sequence - 1 - COALESCE(latest.end_sequence, -1) AS summary_lag
    FROM conversations AS c
    LEFT JOIN LATERAL (
        SELECT m.end_sequence FROM memory AS m
        WHERE m.conversation_id = c.conversation_id AND m.status = 'completed'
        ORDER BY m.end_sequence DESC
        LIMIT 1
    ) AS latest ON true
    ORDER BY summary_lag DESC, c.conversation_id
    LIMIT %(limit)s
), stuck AS (
    SELECT s.conversation_id, count(*) AS stuck
    FROM stuck_processing_after(make_interval(secs => %(stuck_after_s)s)) AS s
    GROUP BY s.conversation_id
)
SELECT l.conversation_id,
       l.round_count AS rounds,
       l.next_sequence - 1 AS newest_sequence,
       served.memory_id AS served_memory_id,
       served.end_sequence AS served_end_sequence,
       l.summary_lag,
       l.round_count - COALESCE(served_round.round_number, 0) AS rounds_behind,
       now() - COALESCE(served.finished_at, served.created_at) AS served_memory_age,
       versions.completed,
       versions.failed,
       versions.processing,
       round(versions.failed::numeric / NULLIF(versions.completed + versions.failed, 0), 4) AS failure_rate,
       versions.input_tokens,
       versions.output_tokens,
       round(versions.input_tokens::numeric / NULLIF(versions.output_tokens, 0), 4) AS compression_ratio,
       COALESCE(stuck.stuck, 0) AS stuck,
       l.updated_at AS last_round_at
FROM lagging AS l
LEFT JOIN LATERAL (
    SELECT m.memory_id, m.end_sequence, m.finished_at, m.created_at
    FROM memory AS m
    WHERE m.conversation_id = l.conversation_id AND m.status = 'completed'
    ORDER BY m.end_sequence DESC, m.memory_id DESC
    LIMIT 1
) AS served ON true
LEFT JOIN messages AS served_round
       ON served_round.conversation_id = l.conversation_id AND served_round.sequence_number = served.end_sequence
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE m.status = 'completed') AS completed,
           count(*) FILTER (WHERE m.status = 'failed') AS failed,
           count(*) FILTER (WHERE m.status = 'processing') AS processing,
           COALESCE(sum(m.input_tokens) FILTER (WHERE m.status = 'completed'), 0) AS input_tokens,
           COALESCE(sum(m.output_tokens) FILTER (WHERE m.status = 'completed'), 0) AS output_tokens
    FROM memory AS m
    WHERE m.conversation_id = l.conversation_id
) AS versions ON true
LEFT JOIN stuck ON stuck.conversation_id = l.conversation_id
ORDER BY l.summary_lag DESC, l.conversation_id;

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
