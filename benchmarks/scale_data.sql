-- The observability stage's "before" figure: the reads `memory-agent stats` made before health.sql, timed on
-- the data memory_agent.testing.generate_conversations writes (sql/queries/testing.sql).

-- before_totals --
-- The 0003 view of the totals (memory_health for every conversation underneath).
SELECT * FROM memory_health_totals;

-- before_conversations --
-- Every conversation's memory_health row, the most lagging first (the command kept the first --limit).
SELECT * FROM memory_health ORDER BY summary_lag DESC, conversation_id;

-- before_models --
-- The 0003 view of the per-model stats.
SELECT * FROM summary_model_stats ORDER BY summaries DESC, model_name;

-- before_stuck --
-- The stuck rows.
SELECT * FROM stuck_processing_after(make_interval(secs => %(older_than_s)s));
