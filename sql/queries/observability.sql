-- Observability queries. Each block starts with `-- name --` and a one-line description.
-- Views and functions they use are defined in sql/definitions/. These are what memory_agent's observability
-- module and the `memory-agent inspect | at | stats` commands run (psycopg parameters); four questions to paste
-- into psql are in sql/psql/observability.sql.

-- observe_conversation --
-- One conversation's memory health (no row when the thread is unknown). `user_id`: its owner (conversation_user, or
-- ConversationQueries.conversation_owner), read first: every statement here names it, so on Citus it runs on one shard.
SELECT * FROM memory_health
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s;

-- observe_version_chain --
-- Every memory version of a conversation with its base and the rounds it covers, oldest first.
SELECT memory_id, start_sequence, end_sequence, base_memory_id, base_end_seq, status, first_round, last_round,
       covers, created_at, finished_at, generation_time_ms, attempts, model_name, input_tokens, output_tokens,
       error, memory_text
FROM memory_version_chain
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s
ORDER BY memory_id;

-- observe_round_context --
-- A stored round's context as sequence ranges (memory served, gap, input) and its metrics.
SELECT *
FROM round_context
WHERE user_id = %(user_id)s AND conversation_id = %(conversation_id)s
  AND round_number = %(round_number)s
ORDER BY round_metrics_id DESC
LIMIT 1;

-- observe_context_at_round --
-- What the model was given at a round: the memory version's text, then the gap and input messages.
SELECT * FROM context_at_round(%(conversation_id)s, %(round_number)s);

-- observe_message_visibility --
-- How a message reached the model in each round from its own on (input, gap, summarized, dropped, ...).
SELECT * FROM message_visibility(%(conversation_id)s, %(sequence_number)s, %(text)s);

-- observe_stuck_processing --
-- Processing rows quiet for longer than a timeout in seconds (all conversations), oldest first.
SELECT * FROM stuck_processing_after(make_interval(secs => %(older_than_s)s));

-- observe_generation_time --
-- Average, maximum, p50 and p95 summarization time over completed summaries.
SELECT * FROM summary_generation_time;

-- observe_window_progression --
-- The newest completed memory versions with their window (one conversation, or all when null).
SELECT *
FROM sliding_window_progression
WHERE %(conversation_id)s::text IS NULL
   OR (user_id = %(user_id)s::text AND conversation_id = %(conversation_id)s::text)
ORDER BY created_at DESC, memory_id DESC
LIMIT %(limit)s;

-- observe_weekly_report --
-- The weekly report: fallback share, truncation share, p95 latency, summary lag and summary cost.
SELECT * FROM round_report_weekly ORDER BY week DESC;
