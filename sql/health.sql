-- Memory health at scale: what `memory-agent stats` and observability.health() run. Each block starts with
-- `-- name --` and a one-line description.
--
-- The views memory_health and memory_health_totals (migration 0003) answer the same questions for a reader in
-- psql, but computing memory_health for every conversation costs several index probes per conversation and
-- `stats` used to fetch all of it to keep twenty rows. Here each table is read in one aggregate pass: the
-- served memory of a conversation is one index-only probe of (conversation_id, status, end_sequence DESC),
-- the most lagging conversations are chosen in that same pass by ORDER BY ... LIMIT, and only they get the
-- per-conversation details (health_conversations). Stuck rows follow the timeout given (the reclaimer's rule,
-- stuck_processing_after), not a fixed 5 minutes; the totals' count of them is the number of rows that
-- function returns, which health() fetches anyway (a call to it here would keep these scans from running
-- in parallel: the function is not marked parallel safe).

-- health_totals --
-- Memory health of the whole database in one row (memory_health_totals' columns but stuck), and the `limit` most lagging conversation ids.
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
), conversation_lag AS MATERIALIZED (
    -- One pass over the conversations serves the lag figures and the choice of the most lagging.
    SELECT c.conversation_id, c.next_sequence - 1 - COALESCE(served.end_sequence, -1) AS summary_lag
    FROM conversations AS c
    LEFT JOIN LATERAL (
        SELECT m.end_sequence FROM memory AS m
        WHERE m.conversation_id = c.conversation_id AND m.status = 'completed'
        ORDER BY m.end_sequence DESC
        LIMIT 1
    ) AS served ON true
), lag AS (
    SELECT count(*) AS conversations,
           max(summary_lag) AS max_summary_lag,
           round(avg(summary_lag), 2) AS avg_summary_lag
    FROM conversation_lag
), most_lagging AS (
    SELECT COALESCE(array_agg(conversation_id ORDER BY summary_lag DESC, conversation_id), '{}') AS ids
    FROM (SELECT conversation_id, summary_lag FROM conversation_lag
          ORDER BY summary_lag DESC, conversation_id
          LIMIT %(limit)s) AS top
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
       most_lagging.ids AS most_lagging
FROM summaries, rounds, lag, most_lagging;

-- health_conversations --
-- memory_health's columns for the conversations named, in the order given (stuck after a timeout in seconds).
WITH named AS (
    SELECT c.conversation_id, c.round_count, c.next_sequence, c.updated_at, named.position
    FROM unnest(%(conversation_ids)s::text[]) WITH ORDINALITY AS named (conversation_id, position)
    JOIN conversations AS c ON c.conversation_id = named.conversation_id
), stuck AS (
    SELECT s.conversation_id, count(*) AS stuck
    FROM stuck_processing_after(make_interval(secs => %(stuck_after_s)s)) AS s
    GROUP BY s.conversation_id
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
       n.updated_at AS last_round_at
FROM named AS n
LEFT JOIN LATERAL (
    SELECT m.memory_id, m.end_sequence, m.finished_at, m.created_at
    FROM memory AS m
    WHERE m.conversation_id = n.conversation_id AND m.status = 'completed'
    ORDER BY m.end_sequence DESC, m.memory_id DESC
    LIMIT 1
) AS served ON true
LEFT JOIN messages AS served_round
       ON served_round.conversation_id = n.conversation_id AND served_round.sequence_number = served.end_sequence
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE m.status = 'completed') AS completed,
           count(*) FILTER (WHERE m.status = 'failed') AS failed,
           count(*) FILTER (WHERE m.status = 'processing') AS processing,
           COALESCE(sum(m.input_tokens) FILTER (WHERE m.status = 'completed'), 0) AS input_tokens,
           COALESCE(sum(m.output_tokens) FILTER (WHERE m.status = 'completed'), 0) AS output_tokens
    FROM memory AS m
    WHERE m.conversation_id = n.conversation_id
) AS versions ON true
LEFT JOIN stuck ON stuck.conversation_id = n.conversation_id
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
