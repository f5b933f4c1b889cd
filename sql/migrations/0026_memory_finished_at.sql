-- 0026_memory_finished_at: summaries by when they finished, so that the last hour's failure rate (GET /ready,
-- `memory-agent stats`, memory_health_last_hour) reads that hour's versions, not every version ever written.
CREATE INDEX IF NOT EXISTS idx_memory_finished_at ON memory (finished_at) WHERE finished_at IS NOT NULL;
