"""The design's short-term tier: one conversation's sliding window.

Owns the window maths and the trigger rule's pure parts (window.py), message validation and
serialization (messages.py), the model's context (context.py: memory injection and the load of memory +
gap; budget.py: the token budget), the round's lease (leases.py), the round start (round_start.py) and end
(round_end.py; its metrics row: round_rows.py) and
the trigger rule with the stale-row sweep (trigger.py), and ConversationMemory, the facade MemoryService
hands out (memory.py: `memory.conversations`); recall at round start is long_term/recall/round_start.py, which
round_start.py calls.
May import: db/, long_term/ (recall at round start), runtime (the memory loop), ledger, errors,
settings, schemas. Never summarize/, jobs/, integrations/, observability/, cli/ nor service/: a new
`processing` row is handed on through the `dispatch` callable it is given.
"""
