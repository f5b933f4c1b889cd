"""The read side of observability: version chain, what the model was given at a round, memory health
(reads.py; its statements in queries.py, ObservabilityQueries, over the views and
functions of sql/; the weekly upgrade report in upgrade.py).

May import: db/, conversation/ (to rebuild a round's context as the model saw it), errors, schemas.
Never service/, integrations/ nor cli/ (the commands in cli/ read through it).
"""
