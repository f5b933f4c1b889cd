"""The `memory-agent` command (main.py) and its command groups: demo, worker, and the observability
commands (inspect, at, stats), serve and api-key
(the HTTP API).

The top of the stack: may import anything in memory_agent; nothing imports it.
"""
