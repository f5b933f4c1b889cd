-- The weekly upgrade report (memory-system-evolution-plan.md, section 5): per ISO week (Monday to Sunday, UTC)
-- and tenant, each metric of the seed beside its threshold and whether it is crossed (strictly above), so
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
CREATE VIEW upgrade_report_weekly AS
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
