-- A summary's pick-up and completion (memory_agent/db/summary_queries.py), as functions of plain statements that each
-- name the user: on Citus each runs on the user's shard (a modifying CTE joined to other reads is planned through
-- intermediate results there, and a function in RETURNING is refused).

-- start_memory: a summarizer picks up a processing row; returns it with its base memory's text and end, and the
-- messages it summarizes (incremental: after the base memory, never before the window start), one row per message,
-- oldest first (one row with a null sequence_number when there are none). No row: the memory is no longer processing.
CREATE FUNCTION start_memory(p_user_id text, p_memory_id integer)
RETURNS TABLE (memory_id integer, user_id text, tenant_id text, conversation_id text, start_sequence integer,
               end_sequence integer, base_memory_id integer, attempts integer, base_memory_text text,
               base_end_sequence integer, sequence_number integer, message jsonb)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
#variable_conflict use_column
DECLARE
    target record;
    v_base_text text;
    v_base_end integer;
BEGIN
    UPDATE memory AS m
    SET started_at = now(), attempts = m.attempts + 1
    WHERE m.user_id = p_user_id AND m.memory_id = p_memory_id AND m.status = 'processing'
    RETURNING m.memory_id, m.user_id, m.tenant_id, m.conversation_id, m.start_sequence, m.end_sequence,
              m.base_memory_id, m.attempts
    INTO target;
    IF target.memory_id IS NULL THEN
        RETURN;
    END IF;
    SELECT b.memory_text, b.end_sequence INTO v_base_text, v_base_end
    FROM memory AS b WHERE b.user_id = p_user_id AND b.memory_id = target.base_memory_id;
    RETURN QUERY
    SELECT target.memory_id, target.user_id, target.tenant_id, target.conversation_id, target.start_sequence,
           target.end_sequence, target.base_memory_id, target.attempts, v_base_text, v_base_end,
           w.sequence_number, w.message
    FROM (SELECT 1) AS one
    LEFT JOIN (
        SELECT s.sequence_number, s.message
        FROM messages AS s
        WHERE s.user_id = p_user_id AND s.conversation_id = target.conversation_id
          AND s.sequence_number BETWEEN GREATEST(target.start_sequence, COALESCE(v_base_end + 1, 0))
                                    AND target.end_sequence
    ) AS w ON true
    ORDER BY w.sequence_number;
END
$$;

-- complete_memory: record a finished summary (finished_at: the service's clock, which day's material it is), in the
-- caller's transaction: hold the conversation against erasure until the version and its items commit (FOR KEY
-- SHARE: rounds, which update the row but never its key, go on; a forget takes FOR UPDATE and waits for the job,
-- or ran first and left no row to hold), name the tenant row-level security filters the items written next by (as
-- set_tenant), complete the row if it is still `processing` (not reclaimed meanwhile), and record the model calls
-- made for it (record_llm_calls at `p_now`; none when `p_calls` is empty or null). The completed memory_id; null:
-- the conversation is gone or the version was reclaimed, nothing written.
CREATE FUNCTION complete_memory(
    p_tenant_id text, p_user_id text, p_conversation_id text, p_memory_id integer, p_memory_text text,
    p_items jsonb, p_generation_time_ms integer, p_model_name text, p_input_tokens integer,
    p_output_tokens integer, p_summarized_start integer, p_summarized_end integer, p_finished_at timestamptz,
    p_now timestamptz, p_calls jsonb
)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_id integer;
BEGIN
    PERFORM 1 FROM conversations AS c
    WHERE c.user_id = p_user_id AND c.conversation_id = p_conversation_id
    FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('memory_agent.tenant_id', p_tenant_id, true);
    UPDATE memory AS m
    SET status = 'completed', memory_text = p_memory_text, items = p_items,
        generation_time_ms = p_generation_time_ms, model_name = p_model_name, input_tokens = p_input_tokens,
        output_tokens = p_output_tokens, summarized_start = p_summarized_start,
        summarized_end = p_summarized_end, error = NULL, finished_at = p_finished_at
    WHERE m.user_id = p_user_id AND m.memory_id = p_memory_id AND m.status = 'processing'
      AND m.conversation_id = p_conversation_id
    RETURNING m.memory_id INTO v_id;
    IF v_id IS NOT NULL AND jsonb_array_length(COALESCE(p_calls, '[]'::jsonb)) > 0 THEN
        PERFORM record_llm_calls(p_tenant_id, p_user_id, p_now, p_calls);
    END IF;
    RETURN v_id;
END
$$;

-- store_round_metrics: one round_metrics row from `r`'s columns (its id and created_at are the table's defaults), in
-- one plain VALUES insert (routed to the user's shard on Citus). end_round and record_failed_round apply it.
CREATE FUNCTION store_round_metrics(p_tenant_id text, p_user_id text, p_conversation_id text, r round_metrics)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO round_metrics (
        tenant_id, user_id, conversation_id, round_number, first_sequence, last_sequence, memory_id,
        memory_end_sequence, gap_start_sequence, gap_end_sequence, gap_size, context_messages, context_tokens,
        truncated, truncation, retrieval_path, latency_load_ms, latency_round_ms, summary_triggered, trigger_outcome,
        triggered_memory_id, error_stage, error, query, fts_hits, trgm_hits, used_fallback, recall_path,
        context_items, estimated_tokens, recall_truncated, latency_retrieval_ms, latency_llm_ms, recall_status,
        recall_block, recall_hits)
    VALUES (
        p_tenant_id, p_user_id, p_conversation_id, r.round_number, r.first_sequence, r.last_sequence, r.memory_id,
        r.memory_end_sequence, r.gap_start_sequence, r.gap_end_sequence, r.gap_size, r.context_messages,
        r.context_tokens, r.truncated, r.truncation, r.retrieval_path, r.latency_load_ms, r.latency_round_ms,
        r.summary_triggered, r.trigger_outcome, r.triggered_memory_id, r.error_stage, r.error, r.query, r.fts_hits,
        r.trgm_hits, r.used_fallback, r.recall_path, r.context_items, r.estimated_tokens, r.recall_truncated,
        r.latency_retrieval_ms, r.latency_llm_ms, r.recall_status, r.recall_block, r.recall_hits);
END
$$;

-- record_failed_round: the metrics row of a round that failed (`p_metrics`: its columns as a JSON object), unless the
-- conversation it started on was erased since (`p_started_on`: that row's created_at, as end_round's; null: nothing
-- was stored when it started). The row names the memory the round was served and holds its recall query: forgetting
-- wins, as at a round end. The conversation row is held (FOR KEY SHARE, as a summary job holds it) until commit, so
-- an erasure either committed before (false: nothing written) or waits and erases this row too.
CREATE FUNCTION record_failed_round(
    p_tenant_id text, p_user_id text, p_conversation_id text, p_started_on timestamptz, p_metrics jsonb
)
RETURNS TABLE (recorded boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    IF p_started_on IS NOT NULL THEN
        PERFORM 1 FROM conversations AS c
        WHERE c.user_id = p_user_id AND c.conversation_id = p_conversation_id AND c.created_at = p_started_on
        FOR KEY SHARE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT false;
            RETURN;
        END IF;
    END IF;
    PERFORM store_round_metrics(p_tenant_id, p_user_id, p_conversation_id,
                                jsonb_populate_record(NULL::round_metrics, p_metrics));
    RETURN QUERY SELECT true;
END
$$;
