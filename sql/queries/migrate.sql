-- Named queries of the migration runner (memory_agent/db/schema.py, SchemaStatements). Each block starts with `-- name --` and a
-- one-line description. They run with search_path set to the memory_agent schema.

-- create_schema_migrations --
-- The record of applied numbered files (created by the first release without checksum: added here).
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum TEXT;
CREATE TABLE IF NOT EXISTS schema_definitions (
    name       TEXT PRIMARY KEY,
    checksum   TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS schema_procrastinate (
    migration             TEXT PRIMARY KEY,
    procrastinate_version TEXT NOT NULL,
    applied_at            TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- schema_present --
-- Whether the schema exists (CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on the database even then).
SELECT to_regnamespace(%(schema)s) IS NOT NULL AS present;

-- migrations_table_present --
-- Whether the schema holds the migration record and its checksum column (absent: nothing applied yet, or a release before checksums).
SELECT to_regclass('schema_migrations') IS NOT NULL AS present,
       EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = to_regclass('schema_migrations') AND attname = 'checksum' AND NOT attisdropped)
           AS has_checksum,
       to_regclass('schema_definitions') IS NOT NULL AS has_definitions;

-- applied_migrations --
-- Every applied numbered file with its checksum (null: applied by a release before checksums).
SELECT version, name, checksum FROM schema_migrations ORDER BY version;

-- applied_versions --
-- Every applied numbered file (a release before checksums has no checksum column).
SELECT version, name, NULL::text AS checksum FROM schema_migrations ORDER BY version;

-- backfill_checksum --
-- Record the checksum of a file applied by a release before checksums.
UPDATE schema_migrations SET checksum = %(checksum)s WHERE version = %(version)s AND checksum IS NULL;

-- record_migration --
-- A numbered file applied.
INSERT INTO schema_migrations (version, name, checksum) VALUES (%(version)s, %(name)s, %(checksum)s);

-- try_migration_lock --
-- Take the schema's migration lock for this session if free (waiters poll: see SchemaStatements.session_lock).
SELECT pg_try_advisory_lock(hashtext(%(key)s)) AS locked;

-- release_migration_lock --
-- Give the schema's migration lock back.
SELECT pg_advisory_unlock(hashtext(%(key)s)) AS released;

-- index_invalid --
-- Whether an index of this name in the schema (first on the search path) is there and invalid: a CREATE INDEX
-- CONCURRENTLY that failed or was cut short left it so.
SELECT EXISTS (
    SELECT 1 FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    -- Compared by name: current_schema()::regnamespace would read a schema named with capitals as lower case.
    WHERE c.relname = %(name)s AND n.nspname = current_schema() AND NOT i.indisvalid
) AS invalid;

-- current_search_path --
-- The session's search_path, restored after a no-transaction file (run with the schema's).
SELECT current_setting('search_path') AS search_path;

-- applied_definitions --
-- The definitions files as last created, with their checksums.
SELECT name, checksum FROM schema_definitions ORDER BY name;

-- drop_definitions --
-- Drop every view and function of the schema except procrastinate's and extensions': the definitions files own them.
-- The functions' signatures are read as text before the first drop: a CASCADE drops the functions that depend on
-- the one dropped (a default that calls it), and a signature read after that would name a missing function.
DO $$
DECLARE
    object record;
    signatures text[];
    signature text;
BEGIN
    FOR object IN
        SELECT c.relname FROM pg_class AS c
        WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()) AND c.relkind IN ('v', 'm')
          AND c.relname NOT LIKE 'procrastinate%'
          AND NOT EXISTS (SELECT 1 FROM pg_depend AS d WHERE d.objid = c.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('DROP VIEW IF EXISTS %I CASCADE', object.relname);
    END LOOP;
    SELECT array_agg(p.oid::regprocedure::text) INTO signatures FROM pg_proc AS p
    WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
      AND p.proname NOT LIKE 'procrastinate%'
      AND NOT EXISTS (SELECT 1 FROM pg_depend AS d WHERE d.objid = p.oid AND d.deptype = 'e');
    FOREACH signature IN ARRAY COALESCE(signatures, '{}') LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %s CASCADE', signature);
    END LOOP;
END
$$;

-- forget_definitions --
-- Before recording the definitions files just created.
DELETE FROM schema_definitions;

-- record_definition --
-- A definitions file created.
INSERT INTO schema_definitions (name, checksum) VALUES (%(name)s, %(checksum)s);

-- procrastinate_state --
-- Whether procrastinate's tables exist, and the newest procrastinate migration recorded (by file name order).
SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS present,
       ARRAY(SELECT migration FROM schema_procrastinate) AS recorded;

-- procrastinate_markers --
-- Objects that date a procrastinate schema created before its version was recorded (each added by one 3.x migration).
SELECT ARRAY(SELECT DISTINCT p.proname::text FROM pg_proc AS p
             WHERE p.pronamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
               AND p.proname IN ('procrastinate_retry_job_v2', 'procrastinate_defer_jobs_v1',
                                 'procrastinate_register_worker_v1', 'procrastinate_defer_job_v1')) AS functions;

-- record_procrastinate --
-- A procrastinate migration applied (or the level of a schema created whole), with the installed procrastinate version.
INSERT INTO schema_procrastinate (migration, procrastinate_version) VALUES (%(migration)s, %(version)s)
ON CONFLICT (migration) DO NOTHING;

-- migration_xact_lock --
-- Inside a migration transaction: the schema's migration lock until it ends.
SELECT pg_advisory_xact_lock(hashtext(%(key)s));

-- restore_search_path --
-- After procrastinate's files: the session's search path as it was.
SELECT set_config('search_path', %(search_path)s, false);

-- embedded_hba_file --
-- The embedded server's pg_hba.conf, rewritten when a cluster made with `trust` gets its password.
SELECT current_setting('hba_file') AS hba_file;

-- reload_configuration --
-- The server reads its configuration files again (the rewritten pg_hba.conf).
SELECT pg_reload_conf() AS reloaded;

-- citus_installed --
-- Whether the citus extension is installed in the database (sql/distribution.sql then applies).
SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS installed;

-- citus_undistributed --
-- Whether a table of the schema (not the migration records, not procrastinate's) is not distributed yet.
SELECT EXISTS (
    SELECT 1 FROM pg_class AS c
    WHERE c.relnamespace = %(schema)s::regnamespace AND c.relkind IN ('r', 'p')
      AND c.relname NOT LIKE 'schema\_%%' AND c.relname NOT LIKE 'procrastinate\_%%'
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = c.oid)
) AS undistributed;

-- citus_sequential_modify --
-- On Citus, one connection per node for the rest of the transaction (a placeholder setting without citus).
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';

-- citus_ddl_propagation --
-- On Citus, whether the transaction's next DDL statements reach the workers; `previous`: the setting before.
WITH before AS (SELECT current_setting('citus.enable_ddl_propagation') AS previous)
SELECT before.previous, set_config('citus.enable_ddl_propagation', %(propagate)s, true) AS propagate FROM before;

-- citus_propagates_set_local --
-- Whether this Citus carries a transaction's SET LOCAL statements to its workers (citus.propagate_set_commands):
-- how a role bound by row-level security names its tenant there (name_transaction_tenant, sql/definitions).
SELECT current_setting('citus.propagate_set_commands', true) IS NOT NULL AS propagates;
