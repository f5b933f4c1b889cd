-- 0025_compact_vectors: a compact copy of every stored vector, and a per-user index that holds it.
-- Recall's vector path scanned all of a user's vectors exactly (HNSW cannot filter by user before it ranks): for a
-- user with 10,000 items and 5,000 turns that read 15,000 rows of 1,536 bytes (384 dimensions) on every recall.
-- Now a first pass ranks the user's compact vectors (one bit a dimension: 48 bytes) by Hamming distance, read from
-- an index alone, and exact cosine distances are computed for the nearest few only (docs/recall.md, cost).
--
-- A bit is the sign of the vector minus its model's center. Uncentered signs say little: an embedding model's
-- vectors share a large common direction (e5's lie at cosine ~0.75 of each other), so most signs are the same for
-- every text; on the LoCoMo development split the exact 50 nearest were 63 % of the raw signs' 200 nearest,
-- 88 % once centered. The center is the mean of the model's vectors of fixed reference texts (never of users'
-- texts: it outlives every erasure), written by the first writer of a model's vectors (long_term/embeddings.py).
-- Vectors stored before this migration have no compact copy yet (the migration cannot run the model to find its
-- center): the embedding job writes it (`index_items`, and the periodic catch-up), and until then recall ranks
-- such vectors exactly, as before.
-- Needs pgvector 0.7 or later (binary_quantize); with an older one recall runs without vectors until the extension
-- is updated and this migration's statements are run again (they are idempotent).
DO $$
BEGIN
    IF to_regclass('item_embeddings') IS NULL OR to_regclass('message_embeddings') IS NULL THEN
        RETURN;  -- pgvector is not installed (0009, 0018): recall runs without vectors
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'binary_quantize') THEN
        RAISE NOTICE 'pgvector is older than 0.7 (no binary_quantize): recall runs without vectors until it is updated';
        RETURN;
    END IF;
    -- One row per embedding model; no user's data (reference texts only), so no tenant policy.
    CREATE TABLE IF NOT EXISTS vector_centers (
        model TEXT PRIMARY KEY,
        center vector NOT NULL);
    ALTER TABLE item_embeddings ADD COLUMN IF NOT EXISTS embedding_bits bit varying;
    ALTER TABLE message_embeddings ADD COLUMN IF NOT EXISTS embedding_bits bit varying;
    -- The first pass's whole read: the user's keys and compact vectors. It replaces the turns' index of 0018
    -- (same leading columns).
    CREATE INDEX IF NOT EXISTS idx_item_embeddings_user_bits ON item_embeddings (user_id, tenant_id, model)
        INCLUDE (item_id, embedding_bits);
    CREATE INDEX IF NOT EXISTS idx_message_embeddings_user_bits ON message_embeddings (user_id, tenant_id, model)
        INCLUDE (conversation_id, sequence_number, embedding_bits);
    DROP INDEX IF EXISTS idx_message_embeddings_user_model;
    -- The vectors without a compact copy yet (those stored before this migration, until the job writes it): ranked
    -- exactly by recall, found by the catch-up. Empty once every copy is written.
    CREATE INDEX IF NOT EXISTS idx_item_embeddings_without_bits ON item_embeddings (user_id, tenant_id, model)
        INCLUDE (item_id) WHERE embedding_bits IS NULL;
    CREATE INDEX IF NOT EXISTS idx_message_embeddings_without_bits ON message_embeddings (user_id, tenant_id, model)
        INCLUDE (conversation_id, sequence_number) WHERE embedding_bits IS NULL;
END
$$;
