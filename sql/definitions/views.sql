-- Views and functions that answer the questions users ask of their memory in SQL, defined once here and
-- re-created when this file changes (memory_agent/db/migrate.py drops every view and function of the schema
-- except procrastinate's, then runs the definitions files in name order).
-- Run with search_path set to the memory_agent schema (setting `db_schema`); objects are unqualified.
-- Functions carry `SET search_path FROM CURRENT` so they find the tables whatever the caller's search_path.
-- Intervals are left as intervals (readable in psql); shares and ratios are numeric, rounded to 4 places.
-- Every join between tables includes user_id (the distribution column): nothing here joins across users.
-- Every view reads its tables as the role that queries it (security_invoker): a role bound by row-level security
-- (0017) sees through a view the rows of the tenant it named, as it would reading the tables.

-- The design's "memory history with version chain", plus the rounds each version covers and what it dropped.
-- Filter on conversation_id; the design orders by end_sequence DESC, `inspect` by memory_id.
CREATE VIEW memory_version_chain WITH (security_invoker = true) AS
SELECT m.*,
       b.end_sequence AS base_end_seq,
       first_message.round_number AS first_round,
       last_message.round_number AS last_round,
       CASE
           WHEN first_message.round_number IS NULL OR last_message.round_number IS NULL THEN NULL
           ELSE CASE WHEN first_message.round_number = last_message.round_number
                     THEN format('Round %s', first_message.round_number)
                     ELSE format('Round %s-%s', first_message.round_number, last_message.round_number)
                END
                || CASE WHEN first_message.round_number = 2 THEN ' (R1 dropped)'
                        WHEN first_message.round_number > 2 THEN format(' (R1-%s dropped)', first_message.round_number - 1)
                        ELSE ''
                   END
       END AS covers
FROM memory AS m
LEFT JOIN memory AS b ON b.user_id = m.user_id AND b.memory_id = m.base_memory_id
LEFT JOIN messages AS first_message
       ON first_message.user_id = m.user_id AND first_message.conversation_id = m.conversation_id
      AND first_message.sequence_number = m.start_sequence
LEFT JOIN messages AS last_message
       ON last_message.user_id = m.user_id AND last_message.conversation_id = m.conversation_id
      AND last_message.sequence_number = m.end_sequence;

-- The timeout after which a quiet `processing` row is stuck, for the views: memory_agent's connections set
-- memory_agent.processing_timeout_s to MEMORY_AGENT_PROCESSING_TIMEOUT_S (so `inspect` counts what the reclaimer
-- reclaims); elsewhere (psql) it is the design's 5 minutes, the default, unless the session sets it.
CREATE FUNCTION processing_timeout()
RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT make_interval(secs => COALESCE(NULLIF(current_setting('memory_agent.processing_timeout_s', true), '')::float8,
                                          300))
$$;

-- The design's "stuck 'processing' tasks" with the timeout as a parameter: the rows memory_is_stuck() holds
-- stuck after `older_than` (the reclaimer applies it with processing_timeout_s, so these are exactly the rows
-- the next sweep will mark failed).
CREATE FUNCTION stuck_processing_after(older_than interval DEFAULT processing_timeout())
RETURNS TABLE (
    conversation_id text,
    memory_id integer,
    start_sequence integer,
    end_sequence integer,
    created_at timestamptz,
    started_at timestamptz,
    attempts integer,
    age interval,
    quiet_for interval,
    user_id text,
    tenant_id text
)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
BEGIN
    -- PL/pgSQL, as every function here that reads a table with its parameters: Citus does not plan a SQL
    -- function's parameterized statement over distributed tables.
    RETURN QUERY
    SELECT m.conversation_id, m.memory_id, m.start_sequence, m.end_sequence, m.created_at, m.started_at,
           m.attempts, now() - m.created_at, now() - COALESCE(m.started_at, m.created_at), m.user_id, m.tenant_id
    FROM memory AS m
    WHERE m.status = 'processing'
      AND memory_is_stuck(m.status, m.started_at, m.created_at, older_than, now())
    ORDER BY m.created_at;
END
$$;

-- The design's query as a view: after processing_timeout() (the design's 5 minutes unless the session says otherwise).
CREATE VIEW stuck_processing WITH (security_invoker = true) AS
SELECT * FROM stuck_processing_after(processing_timeout());

-- The design's "sliding window progression" (without its LIMIT 20; add ORDER BY created_at DESC LIMIT 20).
-- dropped_messages: sequences 0..start_sequence-1 are outside the window.
CREATE VIEW sliding_window_progression WITH (security_invoker = true) AS
SELECT m.conversation_id,
       m.memory_id,
       m.start_sequence,
       m.end_sequence,
       m.end_sequence - m.start_sequence + 1 AS window_size,
       m.start_sequence AS dropped_messages,
       m.generation_time_ms,
       m.created_at,
       m.user_id,
       m.tenant_id
FROM memory AS m
WHERE m.status = 'completed';

-- The design's "average summarization time", with the median and 95th percentile.
CREATE VIEW summary_generation_time WITH (security_invoker = true) AS
SELECT avg(m.generation_time_ms)::numeric(12, 1) AS avg_ms,
       max(m.generation_time_ms) AS max_ms,
       count(*) AS total_summaries,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY m.generation_time_ms) AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY m.generation_time_ms) AS p95_ms
FROM memory AS m
WHERE m.status = 'completed'
  AND m.generation_time_ms IS NOT NULL;

-- Per summarizer model: outcome counts, failure rate, latency and cost. Rows still processing are left out;
-- failed rows reclaimed before any model answered have no model_name (the NULL group).
CREATE VIEW summary_model_stats WITH (security_invoker = true) AS
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
           -- Both percentiles from one sort.
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
) AS per_model;

-- One row per stored round: what the model was given, as sequence ranges. The round's input is the leading
-- run of its messages before the first assistant or tool message (the rest the wrapped graph produced).
-- summary_lag: stored messages before the round that no served memory covered (the gap before any cut).
CREATE VIEW round_context WITH (security_invoker = true) AS
SELECT r.conversation_id,
       r.round_number,
       r.created_at,
       r.retrieval_path,
       r.memory_id,
       mem.start_sequence AS memory_start_sequence,
       r.memory_end_sequence,
       r.gap_start_sequence,
       r.gap_end_sequence,
       r.gap_size,
       r.first_sequence AS input_first_sequence,
       produced.input_last_sequence,
       r.first_sequence,
       r.last_sequence,
       r.first_sequence - 1 - COALESCE(r.memory_end_sequence, -1) AS summary_lag,
       r.context_messages,
       r.context_tokens,
       r.truncated,
       r.truncation,
       r.latency_load_ms,
       r.latency_round_ms,
       r.summary_triggered,
       r.trigger_outcome,
       r.triggered_memory_id,
       r.error_stage,
       r.id AS round_metrics_id,
       r.user_id,
       r.tenant_id,
       r.recall_path,
       r.context_items AS recall_items,
       r.estimated_tokens AS recall_tokens,
       r.recall_truncated,
       r.recall_block,
       r.recall_hits
FROM round_metrics AS r
LEFT JOIN memory AS mem ON mem.user_id = r.user_id AND mem.memory_id = r.memory_id
LEFT JOIN LATERAL (
    SELECT COALESCE(min(o.sequence_number) - 1, r.last_sequence) AS input_last_sequence
    FROM messages AS o
    WHERE o.user_id = r.user_id AND o.conversation_id = r.conversation_id
      AND o.sequence_number BETWEEN r.first_sequence AND r.last_sequence
      AND o.role IN ('assistant', 'tool')
) AS produced ON true
WHERE r.round_number IS NOT NULL;

-- Point in time: what the model was given at a round, rebuilt from stored rows. First the memory version
-- served (part 'memory', its text in `content`; absent on the raw path), then the long-term block recall gave
-- the round (part 'recall': the block as injected in `content`, each hit's provenance in `message`; absent when
-- the round recalled nothing), then the gap messages, then the round's input. The memory text and the block
-- are injected per injection_mode (prefix or system), as at run time.
CREATE FUNCTION context_at_round(p_conversation_id text, p_round_number integer)
RETURNS TABLE (
    "position" integer,
    part text,
    memory_id integer,
    sequence_number integer,
    round_number integer,
    role text,
    content text,
    message jsonb
)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    -- The owner first, a statement of its own: then every read names the user (on Citus: one shard).
    v_user_id text := conversation_user(p_conversation_id);
BEGIN
    RETURN QUERY
    WITH r AS (
        SELECT rc.* FROM round_context AS rc
        WHERE rc.user_id = v_user_id
          AND rc.conversation_id = p_conversation_id AND rc.round_number = p_round_number
        ORDER BY rc.round_metrics_id DESC
        LIMIT 1
    ), parts AS (
        SELECT 0 AS part_order, 'memory' AS part, m.memory_id, NULL::integer AS sequence_number,
               NULL::integer AS round_number, NULL::text AS role, m.memory_text AS content, NULL::jsonb AS message
        FROM r JOIN memory AS m ON m.user_id = r.user_id AND m.memory_id = r.memory_id
        UNION ALL
        SELECT 0, 'recall', r.memory_id, NULL::integer, NULL::integer, NULL::text, r.recall_block, r.recall_hits
        FROM r WHERE r.recall_block IS NOT NULL AND r.recall_block <> ''
        UNION ALL
        SELECT 1, 'gap', r.memory_id, g.sequence_number, g.round_number, g.role, g.content, g.message
        FROM r JOIN messages AS g
          ON g.user_id = r.user_id AND g.conversation_id = r.conversation_id
         AND g.sequence_number BETWEEN r.gap_start_sequence AND r.gap_end_sequence
        UNION ALL
        SELECT 2, 'input', r.memory_id, i.sequence_number, i.round_number, i.role, i.content, i.message
        FROM r JOIN messages AS i
          ON i.user_id = r.user_id AND i.conversation_id = r.conversation_id
         AND i.sequence_number BETWEEN r.input_first_sequence AND r.input_last_sequence
    )
    SELECT (row_number() OVER (ORDER BY p.part_order, p.sequence_number NULLS FIRST, p.part))::integer,
           p.part, p.memory_id, p.sequence_number, p.round_number, p.role, p.content, p.message
    FROM parts AS p
    ORDER BY 1;
END
$$;

-- "Why did the model forget X at round N": for each round from the message's own onwards, how the model
-- saw message `p_sequence_number`: input | produced (this round's own) | gap (verbatim) | summarized
-- (inside the served memory's window) | dropped (slid out of the window) | missing (not given: a token
-- budget cut it, or it was not stored yet when a failed round loaded). With `p_text`, memory_mentions
-- tells whether the served memory text still contains it (case-insensitive).
CREATE FUNCTION message_visibility(
    p_conversation_id text, p_sequence_number integer, p_text text DEFAULT NULL
)
RETURNS TABLE (
    round_number integer,
    retrieval_path text,
    memory_id integer,
    memory_start_sequence integer,
    memory_end_sequence integer,
    visibility text,
    memory_mentions boolean
)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    v_user_id text := conversation_user(p_conversation_id);
BEGIN
    RETURN QUERY
    SELECT rc.round_number, rc.retrieval_path, rc.memory_id, rc.memory_start_sequence, rc.memory_end_sequence,
           CASE
               WHEN p_sequence_number BETWEEN rc.input_first_sequence AND rc.input_last_sequence THEN 'input'
               WHEN p_sequence_number BETWEEN rc.first_sequence AND rc.last_sequence THEN 'produced'
               WHEN p_sequence_number BETWEEN rc.gap_start_sequence AND rc.gap_end_sequence THEN 'gap'
               WHEN p_sequence_number BETWEEN rc.memory_start_sequence AND rc.memory_end_sequence THEN 'summarized'
               WHEN p_sequence_number < rc.memory_start_sequence THEN 'dropped'
               ELSE 'missing'
           END,
           CASE WHEN p_text IS NULL OR m.memory_text IS NULL THEN NULL
                ELSE strpos(lower(m.memory_text), lower(p_text)) > 0
           END
    FROM round_context AS rc
    LEFT JOIN memory AS m ON m.user_id = rc.user_id AND m.memory_id = rc.memory_id
    WHERE rc.user_id = v_user_id
      AND rc.conversation_id = p_conversation_id
      AND rc.last_sequence >= p_sequence_number
    ORDER BY rc.round_number;
END
$$;

-- Memory health per conversation. summary_lag = newest message sequence - newest completed end_sequence
-- (every message counts when nothing is summarized yet); rounds_behind is the same in rounds.
-- served_memory_age: time since the memory a round would be given now was finished.
-- compression_ratio: summarizer input tokens / summary output tokens, completed rows. stuck: as stuck_processing
-- (memory_is_stuck after processing_timeout()).
CREATE VIEW memory_health WITH (security_invoker = true) AS
SELECT c.conversation_id,
       c.round_count AS rounds,
       c.next_sequence - 1 AS newest_sequence,
       served.memory_id AS served_memory_id,
       served.end_sequence AS served_end_sequence,
       (c.next_sequence - 1) - COALESCE(served.end_sequence, -1) AS summary_lag,
       c.round_count - COALESCE(served_round.round_number, 0) AS rounds_behind,
       now() - COALESCE(served.finished_at, served.created_at) AS served_memory_age,
       versions.completed,
       versions.failed,
       versions.processing,
       round(versions.failed::numeric / NULLIF(versions.completed + versions.failed, 0), 4) AS failure_rate,
       versions.input_tokens,
       versions.output_tokens,
       round(versions.input_tokens::numeric / NULLIF(versions.output_tokens, 0), 4) AS compression_ratio,
       versions.stuck,
       c.updated_at AS last_round_at,
       c.user_id,
       c.tenant_id
FROM conversations AS c
-- Lateral: a reader of a few conversations (inspect, stats' most lagging) reads each one's served memory as the
-- first entry of an index, not every conversation's.
LEFT JOIN LATERAL (
    SELECT l.memory_id, l.end_sequence, l.finished_at, l.created_at
    FROM latest_memory AS l
    WHERE l.user_id = c.user_id AND l.conversation_id = c.conversation_id
    LIMIT 1
) AS served ON true
LEFT JOIN messages AS served_round
       ON served_round.user_id = c.user_id AND served_round.conversation_id = c.conversation_id
      AND served_round.sequence_number = served.end_sequence
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE m.status = 'completed') AS completed,
           count(*) FILTER (WHERE m.status = 'failed') AS failed,
           count(*) FILTER (WHERE m.status = 'processing') AS processing,
           COALESCE(sum(m.input_tokens) FILTER (WHERE m.status = 'completed'), 0) AS input_tokens,
           COALESCE(sum(m.output_tokens) FILTER (WHERE m.status = 'completed'), 0) AS output_tokens,
           count(*) FILTER (WHERE memory_is_stuck(m.status, m.started_at, m.created_at,
                                                  processing_timeout(), now())) AS stuck
    FROM memory AS m
    WHERE m.user_id = c.user_id AND m.conversation_id = c.conversation_id
) AS versions ON true;

-- Every round_metrics row in one pass: rounds, fallback and truncation shares, chat-model context tokens. A part
-- of memory_health_totals, and what `memory-agent stats` reads of round_metrics (health_round_totals).
CREATE VIEW memory_round_totals WITH (security_invoker = true) AS
SELECT count(*) AS rounds,
       round(avg((retrieval_path = 'raw')::int), 4) AS fallback_share,
       round(avg(truncated::int), 4) AS truncation_share,
       COALESCE(sum(context_tokens), 0) AS context_tokens
FROM round_metrics;

-- Every memory row in one pass: outcomes, failure rate, generation p50/p95 (one sort), tokens, compression, and
-- the structured rate (completed versions with at least one item in their five lists). A part of
-- memory_health_totals, and what `memory-agent stats` reads of memory (health_summary_totals).
CREATE VIEW memory_summary_totals WITH (security_invoker = true) AS
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

-- The whole database in one row: the numbers `memory-agent stats` opens with.
-- summary_token_share: summarizer tokens / (summarizer tokens + chat-model context tokens of every round).
-- structured_rate: completed versions with at least one structured item / completed versions.
CREATE VIEW memory_health_totals WITH (security_invoker = true) AS
WITH lag AS (
    SELECT count(*) AS conversations,
           max(summary_lag) AS max_summary_lag,
           round(avg(summary_lag), 2) AS avg_summary_lag,
           COALESCE(sum(stuck), 0)::bigint AS stuck
    FROM memory_health
)
SELECT lag.conversations,
       rounds.rounds,
       summaries.completed,
       summaries.failed,
       summaries.processing,
       summaries.failure_rate,
       lag.max_summary_lag,
       lag.avg_summary_lag,
       rounds.fallback_share,
       rounds.truncation_share,
       summaries.generation_p50_ms,
       summaries.generation_p95_ms,
       summaries.input_tokens,
       summaries.output_tokens,
       summaries.compression_ratio,
       rounds.context_tokens,
       round((summaries.input_tokens + summaries.output_tokens)::numeric
             / NULLIF(summaries.input_tokens + summaries.output_tokens + rounds.context_tokens, 0), 4)
           AS summary_token_share,
       lag.stuck,
       summaries.structured_rate
FROM memory_summary_totals AS summaries, memory_round_totals AS rounds, lag;

-- Summary health over a span of time (`memory-agent stats`, GET /ready and observability.health() ask for the
-- hour before the service's clock; memory_health_last_hour for the hour before now()): the summaries that finished
-- in it, how many failed and their share, and the summary lag the rounds started in it saw (messages after the
-- served memory: round_metrics, as round_report_weekly counts it). A model that fails every summary shows here
-- within the hour, where the all-time totals dilute it.
CREATE FUNCTION summary_health_between(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (
    completed bigint,
    failed bigint,
    failure_rate numeric,
    rounds bigint,
    max_summary_lag integer,
    avg_summary_lag numeric
)
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    SELECT s.completed, s.failed, round(s.failed::numeric / NULLIF(s.completed + s.failed, 0), 4),
           r.rounds, r.max_summary_lag, r.avg_summary_lag
    FROM (SELECT count(*) FILTER (WHERE m.status = 'completed') AS completed,
                 count(*) FILTER (WHERE m.status = 'failed') AS failed
          FROM memory AS m
          WHERE m.finished_at > p_since AND m.finished_at <= p_until) AS s,
         (SELECT count(*) AS rounds,
                 max(rm.first_sequence - 1 - COALESCE(rm.memory_end_sequence, -1)) AS max_summary_lag,
                 round(avg(rm.first_sequence - 1 - COALESCE(rm.memory_end_sequence, -1)), 2) AS avg_summary_lag
          FROM round_metrics AS rm
          WHERE rm.created_at > p_since AND rm.created_at <= p_until) AS r;
END
$$;

CREATE VIEW memory_health_last_hour WITH (security_invoker = true) AS
SELECT * FROM summary_health_between(now() - interval '1 hour', now());

-- The evolution plan's weekly report, adapted to rounds: fallback share (raw path), truncation share,
-- p95 latency, summary lag at round start (see round_context), and what summaries cost that week.
-- Weeks follow the session's TimeZone.
CREATE VIEW round_report_weekly WITH (security_invoker = true) AS
WITH rounds AS (
    SELECT date_trunc('week', r.created_at) AS week,
           count(*) AS rounds,
           count(*) FILTER (WHERE r.error_stage IS NOT NULL AND r.error_stage <> 'retrieval') AS failed_rounds,
           round(avg((r.retrieval_path = 'raw')::int), 4) AS fallback_share,
           round(avg(r.truncated::int), 4) AS truncation_share,
           round(percentile_cont(0.5) WITHIN GROUP (ORDER BY r.latency_round_ms)::numeric, 1) AS p50_latency_ms,
           round(percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_round_ms)::numeric, 1) AS p95_latency_ms,
           round(percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_load_ms)::numeric, 1) AS p95_load_ms,
           round(avg(r.first_sequence - 1 - COALESCE(r.memory_end_sequence, -1)), 2) AS avg_summary_lag,
           max(r.first_sequence - 1 - COALESCE(r.memory_end_sequence, -1)) AS max_summary_lag,
           count(*) FILTER (WHERE r.summary_triggered) AS summaries_triggered,
           COALESCE(sum(r.context_tokens), 0) AS context_tokens
    FROM round_metrics AS r
    GROUP BY 1
), summaries AS (
    SELECT date_trunc('week', m.created_at) AS week,
           count(*) FILTER (WHERE m.status = 'completed') AS summaries_completed,
           count(*) FILTER (WHERE m.status = 'failed') AS summaries_failed,
           COALESCE(sum(m.input_tokens) FILTER (WHERE m.status = 'completed'), 0) AS summary_input_tokens,
           COALESCE(sum(m.output_tokens) FILTER (WHERE m.status = 'completed'), 0) AS summary_output_tokens
    FROM memory AS m
    GROUP BY 1
)
SELECT week,
       COALESCE(rounds.rounds, 0) AS rounds,
       COALESCE(rounds.failed_rounds, 0) AS failed_rounds,
       rounds.fallback_share,
       rounds.truncation_share,
       rounds.p50_latency_ms,
       rounds.p95_latency_ms,
       rounds.p95_load_ms,
       rounds.avg_summary_lag,
       rounds.max_summary_lag,
       COALESCE(rounds.summaries_triggered, 0) AS summaries_triggered,
       COALESCE(summaries.summaries_completed, 0) AS summaries_completed,
       COALESCE(summaries.summaries_failed, 0) AS summaries_failed,
       COALESCE(summaries.summary_input_tokens, 0) AS summary_input_tokens,
       COALESCE(summaries.summary_output_tokens, 0) AS summary_output_tokens,
       COALESCE(rounds.context_tokens, 0) AS context_tokens,
       round((COALESCE(summaries.summary_input_tokens, 0) + COALESCE(summaries.summary_output_tokens, 0))::numeric
             / NULLIF(COALESCE(summaries.summary_input_tokens, 0) + COALESCE(summaries.summary_output_tokens, 0)
                      + COALESCE(rounds.context_tokens, 0), 0), 4) AS summary_token_share
FROM rounds
FULL JOIN summaries USING (week);

-- The weekly upgrade report (the design's upgrade triggers, docs/concepts/consolidation.md): per ISO week (Monday to Sunday, UTC)
-- and tenant, each metric of the design beside its threshold and whether it is crossed (strictly above), so
-- "should we upgrade" is read off one table (`memory-agent report`). Re-created with the other definitions.
--
-- Rounds (round_metrics): a *query* is a round that recalled (fts_hits not null).
--   low_fts_share        queries with fewer than 3 full-text hits / queries              (threshold 30%)
--   fallback_share       queries where trigrams, vectors or the latest turns had to run / queries   (50%)
--   summaries_only_share queries whose recalled block held summaries and items only, no turn / queries (20%)
--   truncation_rate      rounds the context budget or a recall guardrail cut / rounds    (40%)
--   p95_latency_ms       95th percentile of the round's latency, start to persisted       (3000 ms)
-- Spend (llm_calls, priced at call time):
--   summary_cost         memory_agent's calls: conversation summaries, cluster summaries, consolidation notes
--                        and batch summaries (every purpose but 'app')
--   llm_spend            summary_cost + app_cost, app_cost being the app model's answers that reported their
--                        usage (purpose 'app', recorded at round end once a price table or the app model is
--                        configured); without them the share is 1 and says so through app_calls = 0
--   summary_cost_share   summary_cost / llm_spend                                          (25%)
-- A week without rounds or without spend has nulls there (not crossed, not known).
CREATE VIEW upgrade_report_weekly WITH (security_invoker = true) AS
WITH rounds AS (
    SELECT r.tenant_id,
           date_trunc('week', r.created_at AT TIME ZONE 'UTC')::date AS week_start,
           count(*) AS rounds,
           count(*) FILTER (WHERE r.fts_hits IS NOT NULL) AS queries,
           count(*) FILTER (WHERE r.fts_hits < 3) AS low_fts,
           count(*) FILTER (WHERE r.fts_hits IS NOT NULL AND r.used_fallback) AS fallback,
           count(*) FILTER (WHERE r.fts_hits IS NOT NULL AND r.recall_path = 'summaries_only') AS summaries_only,
           count(*) FILTER (WHERE r.truncated OR COALESCE(r.recall_truncated, false)) AS truncated,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY r.latency_round_ms) AS p95_latency_ms
    FROM round_metrics AS r
    GROUP BY 1, 2
), spend AS (
    SELECT c.tenant_id,
           date_trunc('week', c.created_at AT TIME ZONE 'UTC')::date AS week_start,
           COALESCE(sum(c.cost) FILTER (WHERE c.purpose <> 'app'), 0) AS summary_cost,
           COALESCE(sum(c.cost) FILTER (WHERE c.purpose = 'app'), 0) AS app_cost,
           count(*) FILTER (WHERE c.purpose <> 'app') AS summary_calls,
           count(*) FILTER (WHERE c.purpose = 'app') AS app_calls,
           count(*) FILTER (WHERE NOT c.priced) AS unpriced_calls
    FROM llm_calls AS c
    GROUP BY 1, 2
), shares AS (
    SELECT COALESCE(rounds.week_start, spend.week_start) AS week_start,
           COALESCE(rounds.tenant_id, spend.tenant_id) AS tenant_id,
           COALESCE(rounds.rounds, 0) AS rounds,
           COALESCE(rounds.queries, 0) AS queries,
           round(rounds.low_fts::numeric / NULLIF(rounds.queries, 0), 4) AS low_fts_share,
           round(rounds.fallback::numeric / NULLIF(rounds.queries, 0), 4) AS fallback_share,
           round(rounds.summaries_only::numeric / NULLIF(rounds.queries, 0), 4) AS summaries_only_share,
           round(rounds.truncated::numeric / NULLIF(rounds.rounds, 0), 4) AS truncation_rate,
           round(rounds.p95_latency_ms::numeric, 1) AS p95_latency_ms,
           spend.summary_cost,
           spend.app_cost,
           spend.summary_cost + spend.app_cost AS llm_spend,
           round(spend.summary_cost / NULLIF(spend.summary_cost + spend.app_cost, 0), 4) AS summary_cost_share,
           COALESCE(spend.summary_calls, 0) AS summary_calls,
           COALESCE(spend.app_calls, 0) AS app_calls,
           COALESCE(spend.unpriced_calls, 0) AS unpriced_calls
    FROM rounds
    FULL JOIN spend ON spend.tenant_id = rounds.tenant_id AND spend.week_start = rounds.week_start
), judged AS (
    SELECT s.*,
           0.30 AS low_fts_threshold, s.low_fts_share > 0.30 AS low_fts_crossed,
           0.50 AS fallback_threshold, s.fallback_share > 0.50 AS fallback_crossed,
           0.20 AS summaries_only_threshold, s.summaries_only_share > 0.20 AS summaries_only_crossed,
           0.40 AS truncation_threshold, s.truncation_rate > 0.40 AS truncation_crossed,
           3000 AS p95_latency_threshold_ms, s.p95_latency_ms > 3000 AS p95_latency_crossed,
           0.25 AS summary_cost_threshold, s.summary_cost_share > 0.25 AS summary_cost_crossed
    FROM shares AS s
)
SELECT week_start,
       to_char(week_start, 'IYYY-"W"IW') AS iso_week,
       tenant_id,
       rounds, queries,
       low_fts_share, low_fts_threshold, low_fts_crossed,
       fallback_share, fallback_threshold, fallback_crossed,
       summaries_only_share, summaries_only_threshold, summaries_only_crossed,
       truncation_rate, truncation_threshold, truncation_crossed,
       p95_latency_ms, p95_latency_threshold_ms, p95_latency_crossed,
       summary_cost, app_cost, llm_spend, summary_cost_share, summary_cost_threshold, summary_cost_crossed,
       summary_calls, app_calls, unpriced_calls,
       (COALESCE(low_fts_crossed, false)::int + COALESCE(fallback_crossed, false)::int
        + COALESCE(summaries_only_crossed, false)::int + COALESCE(truncation_crossed, false)::int
        + COALESCE(p95_latency_crossed, false)::int + COALESCE(summary_cost_crossed, false)::int) AS crossed
FROM judged;
