"""Per-user long-term memory: items with validity over time, their lineage, cluster summaries, forgetting.

Owns the tables of sql/migrations/0008_long_term.sql and sql/migrations/0011_store.sql, the queries of sql/queries/long_term.sql and
sql/queries/store.sql, MemoryStore (a LangGraph BaseStore over the items), recall (recall/: the search every read
surface runs) and the cost ledger (ledger.py). LongTermQueries (queries.py) is the one module here that runs
statements. Every function takes the caller's psycopg AsyncConnection (search_path on the memory_agent schema) and
runs in its transaction, so the summary job can write a memory version and its items together; a user's
functions take a UserKey checked when it was built (schemas/keys.py). LongTermMemory (memory.py) is the facade
MemoryService hands out (`memory.long_term`): it runs those functions on the memory loop, in the tenant's
transaction. May import: db/, runtime, schemas, errors, resources, llm/, settings, tokens, this package. Never
conversation/: recall at round start is handed to it (schemas/recall.py).
"""

from memory_agent.long_term.cluster_text import offline_cluster_summarizer, summary_rejection
from memory_agent.long_term.clusters import (
    SUMMARY_MIN_CLUSTER_ITEMS,
    ClusterOutcome,
    ClusterSummaries,
    pending_clusters,
    refresh_cluster,
    refresh_clusters,
    refresh_pending_clusters,
    touched_clusters,
)
from memory_agent.long_term.embedders import BundledE5Embeddings, HashingEmbeddings, embedder_from_setting
from memory_agent.long_term.embeddings import index_items, index_pending
from memory_agent.long_term.forget import (
    ForgetReport,
    expire_item,
    forget_conversation,
    forget_item,
    forget_user,
    release_threads,
)
from memory_agent.long_term.reads import ItemFilter, ItemSource, LongTermItem, item_history, list_items
from memory_agent.long_term.scope import Cluster, ItemOrigin, ItemScope
from memory_agent.long_term.store import MemoryStore
from memory_agent.long_term.tenancy import set_tenant, tenant_transaction
from memory_agent.long_term.writer import DONE_PREFIX, LongTermWriteError, RememberOutcome, remember

__all__ = [
    "DONE_PREFIX",
    "SUMMARY_MIN_CLUSTER_ITEMS",
    "BundledE5Embeddings",
    "Cluster",
    "ClusterOutcome",
    "ClusterSummaries",
    "ForgetReport",
    "HashingEmbeddings",
    "ItemFilter",
    "ItemOrigin",
    "ItemScope",
    "ItemSource",
    "LongTermItem",
    "LongTermWriteError",
    "MemoryStore",
    "RememberOutcome",
    "embedder_from_setting",
    "expire_item",
    "forget_conversation",
    "forget_item",
    "forget_user",
    "index_items",
    "index_pending",
    "item_history",
    "list_items",
    "offline_cluster_summarizer",
    "pending_clusters",
    "refresh_cluster",
    "refresh_clusters",
    "refresh_pending_clusters",
    "release_threads",
    "remember",
    "set_tenant",
    "summary_rejection",
    "tenant_transaction",
    "touched_clusters",
]
