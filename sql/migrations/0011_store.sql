-- 0011_store: rows of the LangGraph store (memory_agent.long_term.store.MemoryStore) among the long-term items.
-- A store row is an item whose store_namespace is set: its value is the JSON object the application put, its
-- content the text searched (value.content, or the whole value as JSON). Its slot (value_slot) is 'store:' and
-- the namespace joined by '.' (LangGraph forbids '.' in labels), so a key is one current version per namespace:
-- a put closes the previous version under the same WITHOUT OVERLAPS constraint as every item, and a store row
-- never closes an item a summary stated (nor the reverse). The namespace's second label is the user.
ALTER TABLE items ADD COLUMN IF NOT EXISTS store_namespace TEXT[];
ALTER TABLE items ADD COLUMN IF NOT EXISTS value JSONB;

-- COALESCE: a null inside (a null label, a null value) must fail the check, not pass it as unknown.
ALTER TABLE items ADD CONSTRAINT items_store_row CHECK (COALESCE(
    CASE WHEN store_namespace IS NULL THEN value IS NULL AND value_slot NOT LIKE 'store:%'
         ELSE jsonb_typeof(value) = 'object' AND NOT is_summary AND cardinality(store_namespace) >= 2
              AND array_position(store_namespace, NULL) IS NULL AND store_namespace[2] = user_id
              AND value_slot = 'store:' || array_to_string(store_namespace, '.')
    END, false));
