-- Memory health at scale: what `memory-agent stats` and observability.health() run. Each block starts with
-- `-- name --` and a one-line description.
--
-- The views memory_health and memory_health_totals (sql/definitions/views.sql) answer the same questions for a
-- reader in psql, but computing memory_health for every conversation costs several index probes per conversation
-- and `stats` used to fetch all of it to keep twenty rows. Here each table is read once, in one aggregate pass:
-- round_metrics and memory (memory_round_totals and memory_summary_totals, the views memory_health_totals is made
-- of), and the conversations, where the served memory of each (latest_memory, the rule every reader applies) is
-- one index-only probe and the same pass picks the most lagging by ORDER BY ... LIMIT. Only
-- those get their memory_health rows (health_conversations); the per-model rows are summary_model_stats'. The
-- three passes are independent, so observability.health() runs them at once on separate connections and puts the
-- totals row together in memory_health_totals' column order. Stuck rows follow the timeout given
-- (stuck_processing_after, the reclaimer's rule), not a fixed 5 minutes; the totals' count of them is the number
-- of rows that function returns, which health() fetches anyway.

-- health_round_totals --
-- Every round_metrics row in one pass (memory_round_totals): rounds, fallback and truncation shares, context tokens.
SELECT * FROM memory_round_totals;

-- health_sort_memory --
-- For the rest of the transaction: memory for the percentile sorts, so that they do not spill to disk.
SELECT set_config('work_mem', %(work_mem)s, true);

-- health_summary_totals --
-- Every memory row in one pass (memory_summary_totals): outcomes, failure rate, generation p50/p95 (one sort),
-- tokens, compression, the structured rate.
SELECT * FROM memory_summary_totals;

-- health_lag_totals --
-- Every conversation in one pass: count, max and average summary lag, and the `limit` most lagging ids.
WITH conversation_lag AS MATERIALIZED (
    SELECT c.user_id, c.conversation_id, c.next_sequence - 1 - COALESCE(served.end_sequence, -1) AS summary_lag
    FROM conversations AS c
    LEFT JOIN LATERAL (
        SELECT l.end_sequence FROM latest_memory AS l
        WHERE l.user_id = c.user_id AND l.conversation_id = c.conversation_id
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

-- health_stuck_after --
-- For the rest of the transaction: memory_health counts a `processing` row as stuck after `stuck_after_s` seconds
-- (processing_timeout()), the timeout the stuck rows were listed with.
SELECT set_config('memory_agent.processing_timeout_s', %(stuck_after_s)s, true);

-- health_conversations --
-- memory_health's rows for the conversations named, in the order given (after health_stuck_after).
SELECT h.*
FROM unnest(%(user_ids)s::text[], %(conversation_ids)s::text[]) WITH ORDINALITY
     AS named (user_id, conversation_id, position)
JOIN memory_health AS h ON h.user_id = named.user_id AND h.conversation_id = named.conversation_id
ORDER BY named.position;

-- health_model_stats --
-- Summaries per summarizer model (summary_model_stats), the most used first.
SELECT * FROM summary_model_stats ORDER BY summaries DESC, model_name;

-- health_last_hour --
-- Summaries finished and round summary lag in the hour before `now` (summary_health_between, sql/definitions).
SELECT * FROM summary_health_between(%(now)s::timestamptz - interval '1 hour', %(now)s::timestamptz);
