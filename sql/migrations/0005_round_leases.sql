-- 0005_round_leases: one round at a time per conversation (double texting), decided by the database.
-- A round start takes the conversation's lease (a row here) or, if a live one is held by another round, waits
-- (multitask_strategy 'enqueue') or is refused ('reject'). The round end deletes it in the round's transaction;
-- a holder that died leaves a lease that expires (round_lease_s). No foreign key: a first round has no
-- conversation row yet.

CREATE TABLE IF NOT EXISTS round_leases (
    conversation_id TEXT PRIMARY KEY,
    holder          TEXT NOT NULL,                 -- the round's token
    acquired_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at      TIMESTAMPTZ NOT NULL
);
