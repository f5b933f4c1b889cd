-- 0006_user_keys: every row belongs to a (tenant, user), and every key leads with user_id, the distribution
-- column of a sharded PostgreSQL (Citus): a user's conversations, memory and metrics share a shard.
-- Rows written before this migration get tenant 'default' and the per-conversation user scope
-- 'conversation:' || conversation_id (what a round without a user_id gets).
-- memory_id and round_metrics.id stay unique on their own (sequences); the keys add user_id in front.

-- Foreign keys on the old keys go first; they come back composite below.
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_conversation_id_fkey;
ALTER TABLE memory DROP CONSTRAINT IF EXISTS memory_conversation_id_fkey;
ALTER TABLE memory DROP CONSTRAINT IF EXISTS memory_base_memory_id_fkey;

-- tenant_id: a constant default fills existing rows without rewriting them, then is dropped so that every
-- new row names its tenant.
ALTER TABLE conversations ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default', ADD COLUMN user_id TEXT;
ALTER TABLE messages ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default', ADD COLUMN user_id TEXT;
ALTER TABLE memory ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default', ADD COLUMN user_id TEXT;
ALTER TABLE round_metrics ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default', ADD COLUMN user_id TEXT;
ALTER TABLE round_leases ADD COLUMN tenant_id TEXT NOT NULL DEFAULT 'default', ADD COLUMN user_id TEXT;

UPDATE conversations SET user_id = 'conversation:' || conversation_id;
UPDATE messages SET user_id = 'conversation:' || conversation_id;
UPDATE memory SET user_id = 'conversation:' || conversation_id;
UPDATE round_metrics SET user_id = 'conversation:' || conversation_id;
UPDATE round_leases SET user_id = 'conversation:' || conversation_id;

ALTER TABLE conversations ALTER COLUMN tenant_id DROP DEFAULT, ALTER COLUMN user_id SET NOT NULL;
ALTER TABLE messages ALTER COLUMN tenant_id DROP DEFAULT, ALTER COLUMN user_id SET NOT NULL;
ALTER TABLE memory ALTER COLUMN tenant_id DROP DEFAULT, ALTER COLUMN user_id SET NOT NULL;
ALTER TABLE round_metrics ALTER COLUMN tenant_id DROP DEFAULT, ALTER COLUMN user_id SET NOT NULL;
ALTER TABLE round_leases ALTER COLUMN tenant_id DROP DEFAULT, ALTER COLUMN user_id SET NOT NULL;

-- Primary keys.
ALTER TABLE conversations DROP CONSTRAINT conversations_pkey,
    ADD CONSTRAINT conversations_pkey PRIMARY KEY (user_id, conversation_id);
ALTER TABLE messages DROP CONSTRAINT messages_pkey,
    ADD CONSTRAINT messages_pkey PRIMARY KEY (user_id, conversation_id, sequence_number);
ALTER TABLE memory DROP CONSTRAINT memory_pkey,
    ADD CONSTRAINT memory_pkey PRIMARY KEY (user_id, memory_id);
ALTER TABLE round_metrics DROP CONSTRAINT round_metrics_pkey,
    ADD CONSTRAINT round_metrics_pkey PRIMARY KEY (user_id, id);
ALTER TABLE round_leases DROP CONSTRAINT round_leases_pkey,
    ADD CONSTRAINT round_leases_pkey PRIMARY KEY (user_id, conversation_id);

-- Foreign keys, composite. The base chain never crosses users (a conversation has one user).
ALTER TABLE messages ADD CONSTRAINT messages_conversation_fkey FOREIGN KEY (user_id, conversation_id)
    REFERENCES conversations (user_id, conversation_id) ON DELETE CASCADE;
ALTER TABLE memory ADD CONSTRAINT memory_conversation_fkey FOREIGN KEY (user_id, conversation_id)
    REFERENCES conversations (user_id, conversation_id) ON DELETE CASCADE;
ALTER TABLE memory ADD CONSTRAINT memory_base_memory_fkey FOREIGN KEY (user_id, base_memory_id)
    REFERENCES memory (user_id, memory_id);

-- Indexes, re-keyed. The base index serves the self-reference's foreign-key check: without it, deleting a
-- conversation read every row of `memory` once per deleted version.
DROP INDEX IF EXISTS idx_messages_conversation_round;
CREATE INDEX idx_messages_conversation_round ON messages (user_id, conversation_id, round_number);
DROP INDEX IF EXISTS idx_messages_conversation_message_id;
CREATE INDEX idx_messages_conversation_message_id ON messages (user_id, conversation_id, message_id)
    WHERE message_id IS NOT NULL;
-- The latest completed memory (the view latest_memory) is the first entry of this index: no sort.
DROP INDEX IF EXISTS idx_memory_conversation_status;
CREATE INDEX idx_memory_conversation_status
    ON memory (user_id, conversation_id, status, end_sequence DESC, memory_id DESC);
DROP INDEX IF EXISTS idx_memory_one_processing;
CREATE UNIQUE INDEX idx_memory_one_processing ON memory (user_id, conversation_id) WHERE status = 'processing';
DROP INDEX IF EXISTS idx_memory_conversation_memory_id;
CREATE INDEX idx_memory_conversation_memory_id ON memory (user_id, conversation_id, memory_id);
CREATE INDEX idx_memory_base_memory ON memory (user_id, base_memory_id);
DROP INDEX IF EXISTS idx_round_metrics_conversation_round;
CREATE INDEX idx_round_metrics_conversation_round ON round_metrics (user_id, conversation_id, round_number);

-- Who owns a conversation id: one (tenant, user) per thread, decided by this primary key when two rounds
-- name the same new thread for different users. Keyed by conversation_id because a round that names a
-- thread must find its owner before it knows whether the user it names is the right one (on Citus:
-- distributed by conversation_id, see docs/scaling.md). Conversations whose first round failed have no
-- conversation row and are claimed by their next round.
CREATE TABLE conversation_owners (
    conversation_id TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO conversation_owners (conversation_id, tenant_id, user_id, created_at)
SELECT conversation_id, tenant_id, user_id, created_at FROM conversations;

-- conversation_id determines user_id. Without these statistics the planner multiplies the two selectivities,
-- estimates a conversation at under one row, and picks any index that starts with (user_id,
-- conversation_id) as if it were as good as the primary key (load_context then read a 10,000-message
-- conversation whole through idx_messages_conversation_round to find one sequence number).
CREATE STATISTICS IF NOT EXISTS messages_user_conversation (dependencies, ndistinct)
    ON user_id, conversation_id FROM messages;
CREATE STATISTICS IF NOT EXISTS memory_user_conversation (dependencies, ndistinct)
    ON user_id, conversation_id FROM memory;
CREATE STATISTICS IF NOT EXISTS conversations_user_conversation (dependencies, ndistinct)
    ON user_id, conversation_id FROM conversations;
CREATE STATISTICS IF NOT EXISTS round_metrics_user_conversation (dependencies, ndistinct)
    ON user_id, conversation_id FROM round_metrics;
