-- Long-term item writes with their lineage (memory_agent/long_term/writer.py), as functions of plain statements that
-- each name the user: on Citus an INSERT ... SELECT (and a modifying CTE feeding one) runs through the coordinator
-- and commits on every node it sent results to (two-phase commit); one row at a time, each is routed to the
-- user's shard and the summary that writes them commits on one node.

-- add_item_sources: lineage rows, one per (item, cited message) (a null sequence when it cites none); known rows are
-- kept.
CREATE FUNCTION add_item_sources(
    p_user_id text, p_tenant_id text, p_item_ids bigint[], p_conversation_id text, p_memory_id integer,
    p_sequences integer[], p_now timestamptz
)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_item_id bigint;
    v_sequence integer;
BEGIN
    FOREACH v_item_id IN ARRAY p_item_ids LOOP
        FOREACH v_sequence IN ARRAY p_sequences LOOP
            INSERT INTO item_sources (user_id, tenant_id, item_id, conversation_id, memory_id, sequence_number,
                                      created_at)
            VALUES (p_user_id, p_tenant_id, v_item_id, p_conversation_id, p_memory_id, v_sequence, p_now)
            ON CONFLICT DO NOTHING;
        END LOOP;
    END LOOP;
END
$$;

-- insert_item: a new current version from `p_valid_from`, with its lineage; fails with 23P01 when a concurrent writer
-- opened one first. Its item_id.
CREATE FUNCTION insert_item(
    p_user_id text, p_tenant_id text, p_project text, p_environment text, p_item_type text, p_key text,
    p_value_slot text, p_content text, p_content_norm text, p_importance real, p_confidence real,
    p_valid_from timestamptz, p_conversation_id text, p_memory_id integer, p_sequences integer[], p_now timestamptz
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_item_id bigint;
BEGIN
    INSERT INTO items AS i (user_id, tenant_id, project, environment, item_type, key, value_slot, content,
                            content_norm, importance, confidence, valid_during, created_at, updated_at)
    VALUES (p_user_id, p_tenant_id, p_project, p_environment, p_item_type, p_key, p_value_slot, p_content,
            p_content_norm, p_importance, p_confidence, tstzrange(p_valid_from, NULL), p_now, p_now)
    RETURNING i.item_id INTO v_item_id;
    PERFORM add_item_sources(p_user_id, p_tenant_id, ARRAY[v_item_id], p_conversation_id, p_memory_id, p_sequences,
                             p_now);
    RETURN v_item_id;
END
$$;

-- restate_item: the same content stated again: importance and confidence keep their highest value; the new lineage is
-- added.
CREATE FUNCTION restate_item(
    p_user_id text, p_tenant_id text, p_item_id bigint, p_importance real, p_confidence real,
    p_conversation_id text, p_memory_id integer, p_sequences integer[], p_now timestamptz
)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    UPDATE items AS i
    SET importance = GREATEST(i.importance, p_importance), confidence = GREATEST(i.confidence, p_confidence),
        updated_at = GREATEST(i.updated_at, p_now)
    WHERE i.user_id = p_user_id AND i.tenant_id = p_tenant_id AND i.item_id = p_item_id;
    IF FOUND THEN
        PERFORM add_item_sources(p_user_id, p_tenant_id, ARRAY[p_item_id], p_conversation_id, p_memory_id,
                                 p_sequences, p_now);
    END IF;
END
$$;

-- item_versions: every item version with when its key was first put in the store's scope (`first_put_at`: the
-- creation of the first version of the same item type, key and value slot of the user, project '' and environment
-- ''), which the LangGraph store (memory_agent/long_term/store.py) shows as a value's created_at. The store's reads
-- filter it; their conditions reach the items scan.
CREATE VIEW item_versions WITH (security_invoker = true) AS
SELECT i.user_id, i.tenant_id, i.item_id, i.project, i.environment, i.item_type, i.key, i.value_slot,
       i.store_namespace, i.value, i.updated_at, i.valid_during, first.created_at AS first_put_at
FROM items AS i
CROSS JOIN LATERAL (
    SELECT min(f.created_at) AS created_at FROM items AS f
    WHERE f.user_id = i.user_id AND f.tenant_id = i.tenant_id AND f.project = '' AND f.environment = ''
      AND f.item_type = i.item_type AND f.key = i.key AND f.value_slot = i.value_slot
) AS first;

-- insert_store_item: a new current version of a LangGraph store key from `p_valid_from`, with its one lineage row
-- (no conversation: the application put it); fails with 23P01 when a concurrent writer opened one first. Its
-- item_id. Two plain INSERTs: on Citus a modifying CTE feeding an INSERT ... SELECT writes the shard through COPY,
-- which a role bound by row-level security may not use.
CREATE FUNCTION insert_store_item(
    p_user_id text, p_tenant_id text, p_item_type text, p_key text, p_value_slot text, p_content text,
    p_content_norm text, p_valid_from timestamptz, p_namespace text[], p_value jsonb, p_now timestamptz
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_item_id bigint;
BEGIN
    INSERT INTO items (user_id, tenant_id, item_type, key, value_slot, content, content_norm, valid_during,
                       store_namespace, value, created_at, updated_at)
    VALUES (p_user_id, p_tenant_id, p_item_type, p_key, p_value_slot, p_content, p_content_norm,
            tstzrange(p_valid_from, NULL), p_namespace, p_value, p_now, p_now)
    RETURNING item_id INTO v_item_id;
    INSERT INTO item_sources (user_id, tenant_id, item_id, created_at)
    VALUES (p_user_id, p_tenant_id, v_item_id, p_now);
    RETURN v_item_id;
END
$$;
