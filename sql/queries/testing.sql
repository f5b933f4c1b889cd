-- Named queries of memory_agent.testing.generate_conversations: many conversations written straight into
-- memory_agent's tables with generate_series, shaped like rounds run through with_memory (the integrity
-- checker's rules hold); five conversations per user (user-<i / 5>), tenant 'default'.
-- Each block is a named statement (`-- name --`, a one-line description); the blocks run in this order on a
-- migrated, empty schema with the parameters conversations and rounds (per conversation). Conversation i
-- (1-based):
--   2 messages a round (user, assistant): sequences 0 .. 2*rounds-1;
--   k completed memory versions, k = 0 for every tenth conversation (raw fallback throughout), else
--   1 + i % 4 (at most (rounds-1)/2): version j covers up to the end of round 2j and is served from round
--   2j+1 on; memory_id (i-1)*8 + j, so each version's base is the one before it;
--   one failed version after the last completed one for i % 20 = 3 or 10 (base: version k, or none);
--   one processing version up to the newest message for i % 50 = 7, quiet for an hour (stuck) when
--   i % 1000 = 7, picked up 2 seconds ago otherwise;
--   one round_metrics row per round: the version served, the gap after it, the round's own sequences.

-- generate_fast_writes --
-- For the session: commits do not wait for the WAL flush (generated data, rebuilt if lost).
SET synchronous_commit = off;

-- generate_without_triggers --
-- For the session: no per-row foreign-key triggers (the rows are consistent by construction); superuser only.
SET session_replication_role = replica;

-- scale_plan --
-- Each conversation's plan, read by the blocks below: its user and id, its number k of completed memory versions,
-- when its first round started. A temporary table of the session, which the blocks run in.
CREATE TEMPORARY TABLE scale_plan (
    i integer PRIMARY KEY, user_id text, conversation_id text, k integer, started timestamptz
);

-- scale_plan_rows --
-- Conversation i (the header's rules): user-<i / 5>, conv-<i, 7 digits>, k, started over the last 60 days.
INSERT INTO scale_plan (i, user_id, conversation_id, k, started)
SELECT i, format('user-%%s', i / 5), format('conv-%%s', lpad(i::text, 7, '0')),
       CASE WHEN i %% 10 = 0 THEN 0 ELSE LEAST(1 + i %% 4, (%(rounds)s - 1) / 2) END,
       now() - make_interval(days => i %% 60, mins => i %% 1440)
FROM generate_series(1, %(conversations)s) AS i;

-- scale_conversations --
-- One conversations row per conversation, created when its first round started.
INSERT INTO conversations (tenant_id, user_id, conversation_id, next_sequence, round_count, created_at, updated_at)
SELECT 'default', user_id, conversation_id, 2 * %(rounds)s, %(rounds)s, started,
       started + make_interval(mins => %(rounds)s)
FROM scale_plan;

-- scale_owners --
-- Who owns each conversation id (five conversations per user).
INSERT INTO conversation_owners (conversation_id, tenant_id, user_id)
SELECT conversation_id, tenant_id, user_id FROM conversations;

-- scale_messages --
-- The user message and the assistant reply of every round, as message_to_dict stores them.
INSERT INTO messages (tenant_id, user_id, conversation_id, sequence_number, round_number, role, content, message,
                      created_at)
SELECT 'default', p.user_id, p.conversation_id, 2 * (r - 1) + a, r,
       CASE a WHEN 0 THEN 'user' ELSE 'assistant' END,
       text,
       jsonb_build_object('type', kind, 'data',
                          jsonb_build_object('content', text, 'type', kind, 'id', format('m-%%s-%%s-%%s', p.i, r, a))),
       p.started + make_interval(mins => r)
FROM scale_plan AS p
CROSS JOIN generate_series(1, %(rounds)s) AS r
CROSS JOIN generate_series(0, 1) AS a
CROSS JOIN LATERAL (
    SELECT CASE a WHEN 0 THEN 'human' ELSE 'ai' END AS kind,
           CASE a WHEN 0 THEN format('message %%s of conversation %%s', r, p.i) ELSE format('reply %%s', r) END AS text
) AS m;

-- scale_memory --
-- Completed versions, then a failed one and a processing one where the plan above puts them.
WITH versions AS (
    SELECT p.user_id, p.conversation_id, (p.i - 1) * 8 + j AS memory_id, 'completed' AS status,
           GREATEST(0, 4 * j - 14) AS start_sequence, 4 * j - 1 AS end_sequence,
           CASE WHEN j > 1 THEN (p.i - 1) * 8 + j - 1 END AS base_memory_id,
           p.started + make_interval(mins => 2 * j) AS created_at,
           100 + (p.i * 37 + j * 101) %% 1900 AS generation_time_ms,
           CASE p.i %% 3 WHEN 0 THEN 'model-b' ELSE 'model-a' END AS model_name,
           400 + (p.i + j) %% 300 AS input_tokens, 60 + (p.i * j) %% 80 AS output_tokens,
           NULL::text AS error, NULL::timestamptz AS started_at
    FROM scale_plan AS p
    CROSS JOIN LATERAL generate_series(1, p.k) AS j
    UNION ALL
    SELECT p.user_id, p.conversation_id, (p.i - 1) * 8 + 6, 'failed',
           GREATEST(0, 4 * p.k + 3 - 13), 4 * p.k + 3,
           CASE WHEN p.k > 0 THEN (p.i - 1) * 8 + p.k END,
           p.started + make_interval(mins => 2 * p.k + 1), NULL,
           CASE WHEN p.i %% 20 = 3 THEN 'model-b' END, NULL, NULL,
           'model call failed: timeout', NULL
    FROM scale_plan AS p
    WHERE p.i %% 20 IN (3, 10) AND 4 * p.k + 3 <= 2 * %(rounds)s - 1
    UNION ALL
    SELECT p.user_id, p.conversation_id, (p.i - 1) * 8 + 7, 'processing',
           GREATEST(0, 2 * %(rounds)s - 14), 2 * %(rounds)s - 1,
           CASE WHEN p.k > 0 THEN (p.i - 1) * 8 + p.k END,
           now() - CASE WHEN p.i %% 1000 = 7 THEN interval '2 hours' ELSE interval '3 seconds' END,
           NULL, NULL, NULL, NULL, NULL,
           now() - CASE WHEN p.i %% 1000 = 7 THEN interval '1 hour' ELSE interval '2 seconds' END
    FROM scale_plan AS p
    WHERE p.i %% 50 = 7
)
INSERT INTO memory (tenant_id, user_id, conversation_id, memory_id, memory_text, start_sequence, end_sequence, base_memory_id, status,
                    created_at, generation_time_ms, error, model_name, input_tokens, output_tokens,
                    summarized_start, summarized_end, attempts, started_at, finished_at)
SELECT 'default', user_id, conversation_id, memory_id,
       CASE status WHEN 'completed' THEN format('- [seq %%s] user: message %%s', end_sequence - 1, end_sequence / 2 + 1)
                   ELSE '' END,
       start_sequence, end_sequence, base_memory_id, status, created_at, generation_time_ms, error, model_name,
       input_tokens, output_tokens,
       CASE WHEN status <> 'processing' THEN start_sequence END, CASE WHEN status <> 'processing' THEN end_sequence END,
       1, COALESCE(started_at, created_at),
       CASE WHEN status <> 'processing' THEN created_at + make_interval(secs => COALESCE(generation_time_ms, 500) / 1000.0) END
FROM versions
ORDER BY memory_id;

-- scale_memory_sequence --
-- The memory_id sequence past the ids written above, as if the rows had been inserted one by one.
SELECT setval(pg_get_serial_sequence('memory', 'memory_id'), (SELECT max(memory_id) FROM memory));

-- scale_round_metrics --
-- One metrics row per round: version j served from round 2j+1 on, the raw path before the first one.
WITH rounds AS (
    SELECT p.i, p.user_id, p.conversation_id, p.started, r, LEAST(p.k, (r - 1) / 2) AS j
    FROM scale_plan AS p
    CROSS JOIN generate_series(1, %(rounds)s) AS r
), ranges AS (
    SELECT rounds.*,
           CASE WHEN j > 0 THEN 4 * j END AS gap_start,
           2 * (r - 1) - 1 AS gap_end
    FROM rounds
)
INSERT INTO round_metrics (tenant_id, user_id, conversation_id, round_number, created_at, first_sequence, last_sequence, memory_id,
                           memory_end_sequence, gap_start_sequence, gap_end_sequence, gap_size, context_messages,
                           context_tokens, truncated, retrieval_path, latency_load_ms, latency_round_ms,
                           summary_triggered, trigger_outcome)
SELECT 'default', user_id, conversation_id, r, started + make_interval(mins => r), 2 * (r - 1), 2 * r - 1,
       CASE WHEN j > 0 THEN (i - 1) * 8 + j END,
       CASE WHEN j > 0 THEN 4 * j - 1 END,
       CASE WHEN gap_end >= COALESCE(gap_start, 0) THEN COALESCE(gap_start, 0) END,
       CASE WHEN gap_end >= COALESCE(gap_start, 0) THEN gap_end END,
       GREATEST(0, gap_end - COALESCE(gap_start, 0) + 1),
       GREATEST(0, gap_end - COALESCE(gap_start, 0) + 1) + 1,
       120 + (i + r) %% 400,
       (i + r) %% 97 = 0,
       CASE WHEN j > 0 THEN 'memory+gap' ELSE 'raw' END,
       0.5 + ((i * r) %% 100) / 100.0, 5 + ((i + r * 7) %% 300) / 10.0,
       r %% 2 = 0, CASE WHEN r %% 2 = 0 THEN 'started' ELSE 'below_threshold' END
FROM ranges;

-- The reads `memory-agent stats` made before sql/queries/health.sql, for the stage's "before" figure.

-- generated_counts --
-- What the blocks above wrote: conversations, messages, round_metrics and memory rows.
SELECT (SELECT count(*) FROM conversations) AS conversations, (SELECT count(*) FROM messages) AS messages,
       (SELECT count(*) FROM round_metrics) AS round_metrics, (SELECT count(*) FROM memory) AS memory_versions

-- generated_statistics --
-- What autovacuum would have done on a database that grew to this size (outside a transaction).
VACUUM ANALYZE
