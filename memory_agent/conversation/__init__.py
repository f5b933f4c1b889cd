"""The design's short-term tier: one conversation's sliding window.

Owns the window maths and the trigger rule's pure parts (window.py), message validation and
serialization (messages.py), the model's context (context.py: memory injection and the load of memory +
gap; budget.py: the token budget), the round's lease (leases.py), the round start (round_start.py) and end
(round_end.py; its metrics row: round_rows.py) and
the trigger rule with the stale-row sweep (trigger.py), and ConversationMemory, the facade MemoryService
hands out (memory.py: `memory.conversations`); recall at round start is a RoundRecaller (schemas/recall.py)
the service hands to round_start.py (long_term/recall/round_start.py implements it).
May import: db/, runtime (the memory loop), errors, settings, schemas. Never long_term/ (recall is handed in),
summarize/, jobs/, integrations/, observability/, cli/ nor service/: a new `processing` row is handed on through
the `dispatch` callable it is given.
"""
