-- 0016_unlogged_leases: round leases are not written to the WAL.
-- A lease lives for one round (taken at its start, deleted in its round-end transaction). Logged, taking it cost
-- a WAL flush (fsync) at every round start, 1-4 ms of the round measured under load; unlogged, a transaction
-- that writes nothing else commits without one. What is given up: after a crash of the PostgreSQL server the
-- table is empty, which is what every lease would be by then anyway (their rounds' connections died with it);
-- a standby holds no leases (rounds start on the primary only).
ALTER TABLE round_leases SET UNLOGGED;
