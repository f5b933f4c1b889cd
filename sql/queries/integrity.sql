-- The integrity checker's rules (memory_agent.testing.queries.find_violations): what must hold in a memory_agent
-- schema after any sequence of rounds. Each rule returns the rows that break it (none on a healthy store); they run
-- with search_path on the schema checked.

-- integrity_schemas --
-- The schemas in which memory_agent's migrations ran (they hold schema_migrations and memory).
SELECT table_schema FROM information_schema.tables WHERE table_name = 'schema_migrations'
  AND table_schema IN (SELECT table_schema FROM information_schema.tables WHERE table_name = 'memory')
ORDER BY table_schema;

-- integrity_sequences_gap_free --
-- A conversation's messages are numbered 0..n-1 and its next_sequence is n.
SELECT c.conversation_id, c.next_sequence, count(m.sequence_number) AS stored,
       min(m.sequence_number) AS first, max(m.sequence_number) AS last
FROM conversations AS c
LEFT JOIN messages AS m ON m.conversation_id = c.conversation_id
GROUP BY c.conversation_id, c.next_sequence
HAVING count(m.sequence_number) <> c.next_sequence
    OR (count(m.sequence_number) > 0
        AND (min(m.sequence_number) <> 0 OR max(m.sequence_number) <> count(m.sequence_number) - 1));

-- integrity_rounds_whole --
-- A round's messages are consecutive; rounds are numbered 1..round_count in sequence order.
SELECT conversation_id, round_number, min(sequence_number) AS first, max(sequence_number) AS last,
       count(*) AS messages
FROM messages
GROUP BY conversation_id, round_number
HAVING max(sequence_number) - min(sequence_number) + 1 <> count(*)
UNION ALL
SELECT m.conversation_id, m.round_number, m.sequence_number, NULL, NULL
FROM messages AS m
JOIN messages AS next
  ON next.conversation_id = m.conversation_id AND next.sequence_number = m.sequence_number + 1
WHERE next.round_number NOT IN (m.round_number, m.round_number + 1)
UNION ALL
SELECT c.conversation_id, c.round_count, NULL, max(m.round_number), NULL
FROM conversations AS c
JOIN messages AS m ON m.conversation_id = c.conversation_id
GROUP BY c.conversation_id, c.round_count
HAVING max(m.round_number) <> c.round_count OR min(m.round_number) <> 1;

-- integrity_linear_chain --
-- A version's base is a completed, earlier version of its conversation ending before it; no two completed
-- versions share a base or a range.
SELECT m.conversation_id, m.memory_id, m.base_memory_id, 'bad base' AS problem
FROM memory AS m
LEFT JOIN memory AS b ON b.memory_id = m.base_memory_id
WHERE m.base_memory_id IS NOT NULL
  AND (b.memory_id IS NULL OR b.conversation_id <> m.conversation_id OR b.status <> 'completed'
       OR b.memory_id >= m.memory_id OR b.end_sequence >= m.end_sequence)
UNION ALL
SELECT conversation_id, min(memory_id), base_memory_id, 'two completed versions share a base'
FROM memory
WHERE status = 'completed'
GROUP BY conversation_id, base_memory_id
HAVING count(*) > 1
UNION ALL
SELECT conversation_id, min(memory_id), NULL, 'two completed versions share a range'
FROM memory
WHERE status = 'completed'
GROUP BY conversation_id, start_sequence, end_sequence
HAVING count(*) > 1;

-- integrity_at_most_one_processing --
-- At most one `processing` row per conversation.
SELECT conversation_id, count(*) FROM memory WHERE status = 'processing'
GROUP BY conversation_id HAVING count(*) > 1;

-- integrity_no_memory_past_the_stored_messages --
-- No memory version covers a sequence past the stored messages.
SELECT m.conversation_id, m.memory_id, m.end_sequence, c.next_sequence
FROM memory AS m
JOIN conversations AS c ON c.conversation_id = m.conversation_id
WHERE m.end_sequence >= c.next_sequence OR m.start_sequence < 0;

-- integrity_metrics_agreeing --
-- A stored round's metrics row names its first and last sequence; a served memory was a completed version
-- ending where the row says, and the gap starts right after it.
SELECT r.conversation_id, r.round_number, r.first_sequence, r.last_sequence, 'round range' AS problem
FROM round_metrics AS r
JOIN (SELECT conversation_id, round_number, min(sequence_number) AS first, max(sequence_number) AS last
      FROM messages GROUP BY conversation_id, round_number) AS s
  ON s.conversation_id = r.conversation_id AND s.round_number = r.round_number
WHERE r.first_sequence IS DISTINCT FROM s.first OR r.last_sequence IS DISTINCT FROM s.last
UNION ALL
SELECT r.conversation_id, r.round_number, NULL, NULL, 'stored round without its messages'
FROM round_metrics AS r
WHERE r.round_number IS NOT NULL AND r.error_stage IS NULL
  AND EXISTS (SELECT 1 FROM conversations AS c WHERE c.conversation_id = r.conversation_id)
  AND NOT EXISTS (SELECT 1 FROM messages AS m
                  WHERE m.conversation_id = r.conversation_id AND m.round_number = r.round_number)
UNION ALL
SELECT conversation_id, round_number, NULL, NULL, 'two metrics rows for one stored round'
FROM round_metrics
WHERE round_number IS NOT NULL
GROUP BY conversation_id, round_number
HAVING count(*) > 1
UNION ALL
SELECT r.conversation_id, r.round_number, r.memory_id, r.memory_end_sequence, 'served memory'
FROM round_metrics AS r
LEFT JOIN memory AS m ON m.memory_id = r.memory_id
WHERE r.memory_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM conversations AS c WHERE c.conversation_id = r.conversation_id)
  AND (m.memory_id IS NULL OR m.conversation_id <> r.conversation_id
       OR m.end_sequence <> r.memory_end_sequence OR m.status <> 'completed')
UNION ALL
SELECT r.conversation_id, r.round_number, r.gap_start_sequence, r.memory_end_sequence, 'gap start'
FROM round_metrics AS r
WHERE r.gap_start_sequence IS NOT NULL AND NOT r.truncated
  AND r.gap_start_sequence <> COALESCE(r.memory_end_sequence, -1) + 1;
