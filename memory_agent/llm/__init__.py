"""The LLM call path, one of each: the record of a call and the log a job keeps of them, the token counter and
the model's name (calls.py), structured output that degrades (structured.py; reading the answer in answers.py), the model a setting names for each role (models.py), the offline model (offline.py, its
item extraction in extract.py). The prompts are files in prompts/ (resources.prompt); the cost ledger
(long_term/ledger.py) prices and writes the calls.
May import: errors, resources, settings, schemas. Nothing else of the package: every layer that calls a model
(summarize/, consolidation/, conversation/ for the app's calls, the ledger) imports this one.
"""

from memory_agent.llm.calls import (
    PURPOSES,
    CallLog,
    LLMCall,
    Purpose,
    collecting,
    model_name,
    note_answer,
    note_call,
    usage_of,
)
from memory_agent.llm.models import (
    OFFLINE,
    PROVIDER_VARIABLES,
    chat_model,
    chat_model_from_setting,
    default_chat_model,
    openai_chat_model,
    openai_configured,
)
from memory_agent.llm.offline import (
    OFFLINE_CONSOLIDATOR,
    OFFLINE_SUMMARIZER,
    OfflineConsolidationModel,
    OfflineModel,
    OfflineSummaryModel,
)
from memory_agent.llm.structured import StructuredAnswer, StructuredCaller

__all__ = [
    "OFFLINE",
    "OFFLINE_CONSOLIDATOR",
    "OFFLINE_SUMMARIZER",
    "PROVIDER_VARIABLES",
    "PURPOSES",
    "CallLog",
    "LLMCall",
    "OfflineConsolidationModel",
    "OfflineModel",
    "OfflineSummaryModel",
    "Purpose",
    "StructuredAnswer",
    "StructuredCaller",
    "chat_model",
    "chat_model_from_setting",
    "collecting",
    "default_chat_model",
    "model_name",
    "note_answer",
    "note_call",
    "openai_chat_model",
    "openai_configured",
    "usage_of",
]
