-- Named queries of `memory-agent demo` (memory_agent/cli/demo.py).

-- try_demo_lock --
-- Take the demo's lock for this session (held until the session ends): one `memory-agent demo` per database.
SELECT pg_try_advisory_lock(hashtextextended('memory_agent.demo', 0)) AS taken;
