"""Integrations: conversation memory for LangGraph graphs (langgraph.py: with_memory and the MemoryGraph it
returns; nodes.py: memory_load_node, memory_save_node for an app's own StateGraph; direct.py: when MemoryGraph runs
a round without LangGraph's runner) and for `langchain.agents.create_agent` (middleware.py: MemoryMiddleware); a
LangChain retriever over recall (retriever.py: MemoryRetriever, what `memory.as_retriever` returns).

No SQL and no window maths here. The graph and agent integrations depend on the RoundMemory protocol (base.py:
prepare, finish, record or release a round), the retriever on the Recaller protocol (the long-term tier's recall),
which MemoryService implements, not on the concrete service.
May import: conversation/messages (validating a thread id), long_term/memory (the tier the retriever recalls
through) and long_term/recall/block (a recalled hit), errors, schemas.
Never db/, service/ nor cli/.
"""
