"""Recall quality on a LoCoMo-format dataset (`memory-agent eval recall`, the recall benchmark and tests).

dataset.py reads the dataset (samples of sessions of turns, scored questions with their evidence turns),
ingest.py writes a sample straight into the tables (memory_agent.testing's direct writes; the round path is not
run), recall.py asks each question through the round start's recall and scores the hits, and replay.py is the
replay summarizer (the dataset's LLM-written facts and session summaries answered through the summary calls).
Runs no statement itself. May import: conversation/ (recall at round start), long_term/, db/, llm/, testing/ (rows
written straight into the tables, a scratch database), errors, resources. Never api/, integrations/,
jobs/, summarize/, observability/, cli/ nor service/.
"""

from memory_agent.evaluation.dataset import EVAL_TENANT, Sample, load_dataset
from memory_agent.evaluation.ingest import StoredItem, ingest_directly, store_conversation, store_item
from memory_agent.evaluation.recall import EvalReport, evaluate

__all__ = [
    "EVAL_TENANT",
    "EvalReport",
    "Sample",
    "StoredItem",
    "evaluate",
    "ingest_directly",
    "load_dataset",
    "store_conversation",
    "store_item",
]
