-- memory_agent on Citus: the distribution of every table, in one place. `memory-agent migrate` applies this file
-- after the migrations and the definitions whenever the citus extension is installed in the database; it runs with
-- search_path set to memory_agent's schema.
-- Idempotent: a table that is distributed already is left as it is, so a run after new migrations distributes only
-- the tables they added. A table of the schema that is listed nowhere here stops the run (a new table must say
-- where it lives). docs/how-to/scaling.md explains each choice.
DO $$
DECLARE
    wanted record;
    unlisted text;
BEGIN
    FOR wanted IN
        SELECT d.name, d.method, d.column_name, d.colocate_with
        FROM (VALUES
            -- Keyed by user_id, all in the colocation group of conversations: a user's rows share a shard, so
            -- every statement that names a user (a round, a summary, recall, an erasure's) runs on one shard, and
            -- joins and foreign keys between these tables stay inside it. An erasure's transaction writes that
            -- shard alone, but for forget_user's ledger rows, which move to user '' (another shard: a two-phase
            -- commit when it is on another node); the owner rows of its threads go after it commits, each in a
            -- transaction of its own. Parents before children (a foreign key between distributed tables needs
            -- both distributed and colocated).
            (1, 'conversations', 'hash', 'user_id', 'none'),
            (2, 'messages', 'hash', 'user_id', 'conversations'),
            (3, 'memory', 'hash', 'user_id', 'conversations'),
            (4, 'round_metrics', 'hash', 'user_id', 'conversations'),
            (5, 'round_leases', 'hash', 'user_id', 'conversations'),
            (6, 'items', 'hash', 'user_id', 'conversations'),
            (7, 'item_sources', 'hash', 'user_id', 'conversations'),
            (8, 'item_embeddings', 'hash', 'user_id', 'conversations'),
            (9, 'message_embeddings', 'hash', 'user_id', 'conversations'),
            (10, 'consolidation_notes', 'hash', 'user_id', 'conversations'),
            (11, 'batch_summaries', 'hash', 'user_id', 'conversations'),
            (12, 'consolidation_schedules', 'hash', 'user_id', 'conversations'),
            (13, 'llm_calls', 'hash', 'user_id', 'conversations'),
            -- A user's spend per month (the tenant's month is the sum of its rows), plus the tenant's row
            -- (user_id '') that reserve_budget locks: a summary adds its cost on its user's shard.
            (14, 'tenant_monthly_spend', 'hash', 'user_id', 'conversations'),
            -- Tenant-wide rows (user_id ''): all on the shard of '', written only by the consolidation scheduler
            -- and the cost ceiling's reservations, never by a round or a summary.
            (15, 'tenant_scheduler_runs', 'hash', 'user_id', 'conversations'),
            (16, 'budget_reservations', 'hash', 'user_id', 'conversations'),
            -- Looked up by thread id before a round knows its user: keyed by the thread id, a group of its own.
            -- Written in transactions of their own (a thread's first round claims it; an erasure releases it after
            -- it committed), never with the user's rows.
            (17, 'conversation_owners', 'hash', 'conversation_id', 'none'),
            -- Small and global, read on every HTTP request: a copy on every node.
            (18, 'api_keys', 'reference', NULL, NULL),
            -- One row per embedding model (0025), read by every recall with vectors: a copy on every node.
            (19, 'vector_centers', 'reference', NULL, NULL)
        ) AS d (ord, name, method, column_name, colocate_with)
        -- The embedding tables (and vector_centers) exist only where pgvector is installed.
        WHERE to_regclass(d.name) IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM pg_dist_partition AS p WHERE p.logicalrelid = to_regclass(d.name))
        ORDER BY d.ord
    LOOP
        IF wanted.method = 'reference' THEN
            PERFORM create_reference_table(wanted.name);
        ELSE
            PERFORM create_distributed_table(wanted.name, wanted.column_name, colocate_with => wanted.colocate_with);
        END IF;
    END LOOP;

    -- The migration records and procrastinate's queue stay on the coordinator (docs/how-to/scaling.md says why).
    SELECT string_agg(c.relname, ', ' ORDER BY c.relname) INTO unlisted
    FROM pg_class AS c
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
      AND c.relname NOT LIKE 'schema\_%' AND c.relname NOT LIKE 'procrastinate\_%'
      AND NOT EXISTS (SELECT 1 FROM pg_dist_partition AS p WHERE p.logicalrelid = c.oid);
    IF unlisted IS NOT NULL THEN
        RAISE EXCEPTION 'memory_agent tables without a distribution on Citus: %', unlisted
            USING HINT = 'list them in sql/distribution.sql';
    END IF;
END
$$;

-- The round functions keep one generic plan per connection on a single PostgreSQL (sql/definitions/rules.sql says
-- why); Citus plans a statement with unresolved parameters only for the simplest queries, so here they are planned
-- with their values, as any statement. When the definitions wait for this file (a table was not distributed yet:
-- memory_agent/db/citus.py) the functions do not exist yet, and the file runs again after they are created.
DO $$
BEGIN
    IF to_regprocedure('begin_round(text, text, text, text, float8, text[], integer)') IS NOT NULL THEN
        ALTER FUNCTION begin_round(text, text, text, text, float8, text[], integer) RESET plan_cache_mode;
    END IF;
    IF to_regprocedure('end_round(text, text, text, text, jsonb, integer, timestamptz, timestamptz, jsonb, integer, '
                       'integer, float8, boolean)') IS NOT NULL THEN
        ALTER FUNCTION end_round(text, text, text, text, jsonb, integer, timestamptz, timestamptz, jsonb, integer,
                                 integer, float8, boolean)
            RESET plan_cache_mode;
    END IF;
END
$$;
