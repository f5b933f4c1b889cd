-- What a role bound by row-level security is granted (docs/concepts/privacy.md, "Setting it up"), defined once:
-- the owner runs `SELECT memory_agent.grant_bound_role('memory_app')` after every migration.
-- No `ON ALL TABLES`: that grant
-- reached procrastinate's job table (a queued summary's arguments name its user, in no tenant's policy), the
-- embedding models' centers (shared by every tenant's compact vectors), the cost ledger (deleting spend rows reset a
-- cost ceiling) and the migration records.

-- "What a bound role may do, table by table": the tenant's data under its policy in full; the ledger read only (its
-- writes go through record_llm_calls, reserve_budget and pseudonymise_user_ledger, which only add or move amounts);
-- the centers read and written once (the first writer's, never changed); the bookkeeping read only; procrastinate's
-- jobs under a tenant policy of their own (a job names its tenant), the events its inserts write, and the one column
-- its deletes update. A table of the schema not listed here is granted nothing (a test lists the schema's tables).
CREATE FUNCTION bound_role_privileges()
RETURNS TABLE (relation text, privileges text)
LANGUAGE sql IMMUTABLE
AS $$
    VALUES
        ('conversations', 'SELECT, INSERT, UPDATE, DELETE'),
        ('conversation_owners', 'SELECT, INSERT, UPDATE, DELETE'),
        ('messages', 'SELECT, INSERT, UPDATE, DELETE'),
        ('memory', 'SELECT, INSERT, UPDATE, DELETE'),
        ('round_metrics', 'SELECT, INSERT, UPDATE, DELETE'),
        ('round_leases', 'SELECT, INSERT, UPDATE, DELETE'),
        ('items', 'SELECT, INSERT, UPDATE, DELETE'),
        ('item_sources', 'SELECT, INSERT, UPDATE, DELETE'),
        ('item_embeddings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('message_embeddings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('consolidation_notes', 'SELECT, INSERT, UPDATE, DELETE'),
        ('consolidation_schedules', 'SELECT, INSERT, UPDATE, DELETE'),
        ('batch_summaries', 'SELECT, INSERT, UPDATE, DELETE'),
        ('api_keys', 'SELECT, INSERT, UPDATE'),
        ('budget_reservations', 'SELECT, DELETE'),
        ('tenant_scheduler_runs', 'SELECT, INSERT, UPDATE'),
        ('llm_calls', 'SELECT'),
        ('tenant_monthly_spend', 'SELECT'),
        ('vector_centers', 'SELECT, INSERT'),
        ('schema_migrations', 'SELECT'),
        ('schema_definitions', 'SELECT'),
        ('schema_procrastinate', 'SELECT'),
        ('procrastinate_jobs', 'SELECT, INSERT, DELETE'),
        ('procrastinate_events', 'INSERT'),
        ('procrastinate_periodic_defers', 'SELECT (job_id), UPDATE (job_id)'),
        ('procrastinate_workers', '')
$$;

-- "Grant a role what serving tenants needs, and nothing more": every privilege the role held on the schema's
-- tables and sequences is revoked first, so the result is exactly bound_role_privileges() (a role set up with
-- `ON ALL TABLES` before keeps nothing more), plus SELECT on the views (they read as the querying role:
-- security_invoker) and the sequences of the tables it inserts into. procrastinate's job table gets its tenant policy
-- here: its owner (the worker) bypasses it. A role that owns the tables, a superuser or a BYPASSRLS role is refused:
-- the policies would not bind it. Returns the statements run, in order. Run it again after a migration.
CREATE FUNCTION grant_bound_role(p_role text)
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
DECLARE
    v_schema text := current_schema();
    v_role record;
    v_row record;
    v_statements text[] := '{}';
    v_statement text;
    v_citus_ledger text;
    v_citus_spend text;
BEGIN
    SELECT r.rolname, r.rolsuper, r.rolbypassrls INTO v_role FROM pg_roles AS r WHERE r.rolname = p_role;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no role %: create it first (CREATE ROLE ... LOGIN PASSWORD ...)', quote_ident(p_role)
            USING ERRCODE = 'undefined_object';
    END IF;
    IF v_role.rolsuper OR v_role.rolbypassrls
       OR pg_has_role(p_role, (SELECT c.relowner FROM pg_class AS c WHERE c.oid = 'conversations'::regclass), 'MEMBER')
    THEN
        RAISE EXCEPTION 'role % owns the tables, is a superuser or bypasses row-level security: no policy would '
            'bind it; grant a role of its own', quote_ident(p_role)
            USING ERRCODE = 'invalid_grant_operation';
    END IF;
    -- On Citus a function that runs as another role cannot touch shards the transaction already wrote as the
    -- caller ("placements that were modified in this transaction by a different user"), so the ledger functions
    -- that run inside a round's or a forget's transaction run as the caller there, and the role gets the ledger
    -- writes they make (docs/how-to/scaling.md: on Citus the ledger is not insert-only for a bound role). The function
    -- commands first, over one connection per node (Citus refuses them after parallel grants).
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        v_statements := v_statements
            || 'SET LOCAL citus.multi_shard_modify_mode TO sequential'::text
            || format('ALTER FUNCTION %I.record_llm_calls(text, text, timestamptz, jsonb) SECURITY INVOKER', v_schema)
            || format('ALTER FUNCTION %I.pseudonymise_user_ledger(text, text) SECURITY INVOKER', v_schema)
            || format('ALTER FUNCTION %I.reserve_budget(text, timestamptz, numeric, numeric, interval) '
                      'SECURITY INVOKER', v_schema);
        v_citus_ledger := format('GRANT INSERT, DELETE ON %I.llm_calls TO %I; GRANT INSERT ON %I.budget_reservations '
                                 'TO %I', v_schema, p_role, v_schema, p_role);
        v_citus_spend := format('GRANT INSERT, UPDATE, DELETE ON %I.tenant_monthly_spend TO %I', v_schema, p_role);
    END IF;
    v_statements := v_statements
        || format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', v_schema, p_role)
        || format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I', v_schema, p_role)
        || format('GRANT USAGE ON SCHEMA %I TO %I', v_schema, p_role);
    FOR v_row IN
        SELECT b.relation, b.privileges FROM bound_role_privileges() AS b
        WHERE b.privileges <> '' AND to_regclass(format('%I.%I', v_schema, b.relation)) IS NOT NULL
    LOOP
        v_statements := v_statements
            || format('GRANT %s ON %I.%I TO %I', v_row.privileges, v_schema, v_row.relation, p_role);
    END LOOP;
    FOR v_row IN
        SELECT c.relname FROM pg_class AS c
        WHERE c.relnamespace = v_schema::regnamespace AND c.relkind = 'v' ORDER BY c.relname
    LOOP
        v_statements := v_statements || format('GRANT SELECT ON %I.%I TO %I', v_schema, v_row.relname, p_role);
    END LOOP;
    -- The sequences of the tables it inserts into (serial and identity columns): nextval only.
    FOR v_row IN
        SELECT s.relname FROM bound_role_privileges() AS b
        JOIN pg_class AS t ON t.relnamespace = v_schema::regnamespace AND t.relname = b.relation
        JOIN pg_depend AS d ON d.refobjid = t.oid AND d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
        JOIN pg_class AS s ON s.oid = d.objid AND s.relkind = 'S'
        WHERE b.privileges LIKE '%INSERT%'
        ORDER BY s.relname
    LOOP
        v_statements := v_statements
            || format('GRANT USAGE ON SEQUENCE %I.%I TO %I', v_schema, v_row.relname, p_role);
    END LOOP;
    IF v_citus_ledger IS NOT NULL THEN
        v_statements := v_statements || v_citus_ledger || v_citus_spend;
    END IF;
    IF to_regclass(format('%I.procrastinate_jobs', v_schema)) IS NOT NULL THEN
        v_statements := v_statements
            || format('ALTER TABLE %I.procrastinate_jobs ENABLE ROW LEVEL SECURITY', v_schema)
            || format('DROP POLICY IF EXISTS procrastinate_jobs_tenant ON %I.procrastinate_jobs', v_schema)
            || format('CREATE POLICY procrastinate_jobs_tenant ON %I.procrastinate_jobs '
                      'USING (args ->> %L = current_setting(%L, true))',
                      v_schema, 'tenant_id', 'memory_agent.tenant_id');
    END IF;
    FOREACH v_statement IN ARRAY v_statements LOOP
        EXECUTE v_statement;
        RETURN NEXT v_statement;
    END LOOP;
END
$$;
