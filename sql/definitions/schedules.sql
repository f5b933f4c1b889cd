-- The consolidation schedule's progress (memory_agent/consolidation/nightly.py), as a function of plain statements:
-- on Citus an INSERT ... SELECT with a subquery runs through the coordinator, and its conflict clause reaches the
-- worker without the types of its parameters.

-- advance_schedule: record progress: covered_until, last_run and next_run only move forward (a retried older job
-- cannot move them back); a null next_run (a day done, the run not finished) leaves the user due, so a killed run
-- is picked up. A user with no item and no memory left (forgotten meanwhile: callers hold share_forget_lock) gets no
-- row.
CREATE FUNCTION advance_schedule(
    p_user_id text, p_tenant_id text, p_job text, p_schedule text, p_interval_days integer, p_covered_until date,
    p_now timestamptz, p_next_run timestamptz
)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM items AS i WHERE i.user_id = p_user_id AND i.tenant_id = p_tenant_id)
       AND NOT EXISTS (SELECT 1 FROM memory AS m WHERE m.user_id = p_user_id AND m.tenant_id = p_tenant_id) THEN
        RETURN;
    END IF;
    INSERT INTO consolidation_schedules AS s
        (user_id, tenant_id, job, schedule, interval_days, covered_until, last_run, next_run)
    VALUES (p_user_id, p_tenant_id, p_job, p_schedule, p_interval_days, p_covered_until, p_now,
            COALESCE(p_next_run, p_now))
    ON CONFLICT (user_id, tenant_id, job) DO UPDATE
    SET schedule = EXCLUDED.schedule, interval_days = EXCLUDED.interval_days,
        covered_until = GREATEST(s.covered_until, EXCLUDED.covered_until),
        last_run = GREATEST(s.last_run, EXCLUDED.last_run),
        next_run = GREATEST(s.next_run, p_next_run);
END
$$;
