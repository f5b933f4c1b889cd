-- Four questions to paste into psql (never loaded by memory_agent: the psql variable below is not a psycopg
-- parameter). Each block starts with `-- name --` and a one-line description. Run one with the schema on the
-- search_path (SET search_path TO memory_agent, public;) and, for version_chain, set the conversation first
-- (\set conversation_id conv_123). The views they read are defined in sql/definitions/.

-- version_chain --
-- Memory history of one conversation with its version chain, newest window first (psql: \set conversation_id conv_123).
SELECT m.*,
       b.end_sequence AS base_end_seq
FROM memory m
LEFT JOIN memory b ON b.user_id = m.user_id AND b.memory_id = m.base_memory_id
WHERE m.conversation_id = :'conversation_id'
ORDER BY m.end_sequence DESC;

-- stuck_processing_tasks --
-- 'processing' rows quiet for more than 5 minutes, the rule memory_is_stuck (another timeout: SELECT * FROM stuck_processing_after('1 minute')).
SELECT conversation_id, memory_id, created_at, age
FROM stuck_processing;

-- sliding_window_progression --
-- The 20 newest completed memory versions (all conversations) with their window size and generation time.
SELECT
    conversation_id,
    start_sequence,
    end_sequence,
    end_sequence - start_sequence + 1 AS window_size,
    generation_time_ms
FROM memory
WHERE status = 'completed'
ORDER BY created_at DESC
LIMIT 20;

-- average_generation_time --
-- Average and maximum summarization time over every completed summary.
SELECT
    AVG(generation_time_ms) AS avg_ms,
    MAX(generation_time_ms) AS max_ms,
    COUNT(*) AS total_summaries
FROM memory
WHERE status = 'completed'
  AND generation_time_ms IS NOT NULL;
