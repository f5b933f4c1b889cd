-- 0028_contextual_turn_vectors: which text a turn's vector was made from.
-- A turn's vector was made from the turn's own text; a short answer ("Yes! It was amazing", "Went there with the
-- kids last week") carries its meaning in the turn it answers, so its vector said little. The embedding job now
-- makes a turn's vector from the turn with the turn before it (long_term/embeddings.py, docs/concepts/recall.md),
-- and records the version of that text. The vectors stored before are version 0: the job finds them as it finds the
-- turns without a vector (`turns_to_embed`, the periodic catch-up's `users_to_embed`) and makes them again, so an
-- upgraded database converges; until then they still serve recall.
DO $$
BEGIN
    IF to_regclass('message_embeddings') IS NULL THEN
        RETURN;  -- pgvector is not installed (0018): recall runs without vectors
    END IF;
    ALTER TABLE message_embeddings ADD COLUMN IF NOT EXISTS text_version smallint NOT NULL DEFAULT 0;
END
$$;
