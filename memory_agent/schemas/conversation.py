"""The conversation tier's data shapes: MemoryRecord, MemorySummaryOutput, ConversationContext, and round results."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from memory_agent.schemas.items import StructuredItems
from memory_agent.schemas.keys import ConversationKey

MemoryStatus = Literal["processing", "completed", "failed"]


class MemoryRecord(BaseModel):
    """One row of the `memory` table: a version of a conversation's summary."""

    memory_id: int
    conversation_id: str
    memory_text: str
    start_sequence: int
    end_sequence: int
    base_memory_id: int | None = None
    status: MemoryStatus
    created_at: datetime
    generation_time_ms: int | None = None
    error: str | None = None
    model_name: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    summarized_start: int | None = None
    summarized_end: int | None = None
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    items: dict[str, Any] | None = Field(
        default=None, description="The version's structured items (MemorySummaryOutput's five lists), as stored."
    )


class MemorySummaryOutput(StructuredItems):
    """What the summarizer model returns (structured output): the memory text and, beside it, the window's
    structured items (facts, preferences, decisions, todos, entities), each citing its source sequences."""

    summary: str = Field(description="The updated memory of the conversation window.")

    def structured(self) -> StructuredItems:
        """The five item lists alone, as the long-term tier takes them."""
        return StructuredItems(**{name: getattr(self, name) for name in StructuredItems.model_fields})


class ConversationContext(BaseModel):
    """What a round starts from: the latest completed memory (if any) and the gap messages after it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    conversation_id: str
    memory_id: int | None = None
    memory_text: str | None = None
    memory_start_sequence: int | None = None
    memory_end_sequence: int | None = None
    gap_messages: list[BaseMessage] = Field(default_factory=list)
    gap_start_sequence: int | None = None
    gap_end_sequence: int | None = None
    current_messages: list[BaseMessage] = Field(
        default_factory=list,
        description="This round's input: the messages given to get_context_for_workflow not stored yet (by id).",
    )
    gap_capped_messages: int = Field(
        default=0, description="Stored messages after the memory left out by max_gap_messages (oldest first)."
    )

    @property
    def path(self) -> Literal["memory+gap", "raw"]:
        """`memory+gap` when a completed memory is served, `raw` for the no-memory fallback."""
        return "memory+gap" if self.memory_text is not None else "raw"


class RoundSaved(BaseModel):
    """Where a persisted round landed."""

    conversation_id: str
    round_number: int
    first_sequence: int
    last_sequence: int
    stored_positions: list[int] = Field(
        default_factory=list, description="Which of the round's messages (0-based) were new and stored."
    )


TriggerOutcome = Literal[
    "started", "below_threshold", "already_processing", "no_new_messages", "nothing_new", "conversation_erased"
]


class TriggerResult(BaseModel):
    """The trigger rule's decision at a round end."""

    outcome: TriggerOutcome
    memory_id: int | None = None
    start_sequence: int | None = None
    end_sequence: int | None = None
    base_memory_id: int | None = None
    reclaimed_memory_ids: list[int] = Field(default_factory=list)
    # A `started` row its claim picked up: (the row, its messages) as start_memory reads them, for the executor
    # that runs it in this process; None: the job picks it up itself.
    _picked_up: tuple[dict[str, Any], list[dict[str, Any]]] | None = PrivateAttr(default=None)

    @property
    def started(self) -> bool:
        return self.outcome == "started"

    @property
    def picked_up(self) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        return self._picked_up


class SummaryClaim(BaseModel):
    """A summary the trigger rule found due, before it is claimed: the window to claim and the stale rows
    reclaimed on the way. `result` is the rule's outcome once the claim statement has answered."""

    start_sequence: int
    end_sequence: int
    base_memory_id: int | None = None
    reclaimed_memory_ids: list[int] = Field(default_factory=list)

    def result(self, memory_id: int | None) -> TriggerResult:
        """`memory_id`: the claimed `processing` row; None when another process held the conversation's slot."""
        if memory_id is None:
            return TriggerResult(outcome="already_processing", reclaimed_memory_ids=self.reclaimed_memory_ids)
        return TriggerResult(
            outcome="started",
            memory_id=memory_id,
            start_sequence=self.start_sequence,
            end_sequence=self.end_sequence,
            base_memory_id=self.base_memory_id,
            reclaimed_memory_ids=self.reclaimed_memory_ids,
        )


class RoundInfo(BaseModel):
    """What a round was given at its start; recorded in round_metrics when the round ends."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    conversation_id: str
    user_id: str | None = Field(default=None, description="None: the conversation's own scope.")
    tenant_id: str | None = Field(default=None, description="None: the default tenant.")
    input_messages: list[BaseMessage]
    lease: str | None = Field(default=None, description="The token of the round's hold on its conversation.")
    memory_id: int | None = None
    memory_end_sequence: int | None = None
    gap_start_sequence: int | None = None
    gap_end_sequence: int | None = None
    gap_size: int = 0
    context_messages: int = 0
    context_tokens: int | None = None
    truncated: bool = False
    truncation: dict[str, Any] | None = None
    load_ms: float | None = None
    started: float = Field(description="time.perf_counter() at round start")
    prepared: float | None = Field(default=None, description="time.perf_counter() when the context was ready")
    recall: dict[str, Any] = Field(
        default_factory=dict, description="round_metrics fields of recall at round start (query, hits, path, ...)"
    )
    recall_error: str | None = Field(default=None, description="Why recall failed (the round ran without it).")

    context_fingerprints: list[str] = Field(
        default_factory=list,
        description="fingerprint() of every message the graph was given at round start, where what it produced is "
        "told by content later (the memory nodes: their state is a checkpoint's); empty otherwise",
    )
    stored_through: int | None = Field(
        default=None,
        description="The conversation's last stored sequence at round start (None: nothing stored). What the "
        "graph produces is new even when an earlier message has its id and content (a model that repeats itself); "
        "only a copy stored after this point (the same round stored twice) is not stored again.",
    )
    conversation_created_at: datetime | None = Field(
        default=None,
        description="When the stored conversation the round started on was created (None: nothing stored yet). "
        "The round end stores nothing when that conversation was erased meanwhile (delete_conversation, "
        "forget_user): forgetting wins over a round in flight.",
    )

    @property
    def retrieval_path(self) -> Literal["memory+gap", "raw"]:
        return "memory+gap" if self.memory_id is not None else "raw"

    @property
    def key(self) -> ConversationKey:
        return ConversationKey.of(self.conversation_id, self.user_id, self.tenant_id)

    def to_state(self) -> dict[str, Any]:
        """Plain JSON data for graph state: checkpointers serialize it without registered types."""
        data = self.model_dump(exclude={"input_messages"})
        if self.conversation_created_at is not None:  # an ISO text, read back exactly (microseconds, offset)
            data["conversation_created_at"] = self.conversation_created_at.isoformat()
        data["input_messages"] = [message_to_dict(m) for m in self.input_messages]
        return data

    @classmethod
    def from_state(cls, data: Any) -> RoundInfo:
        if isinstance(data, RoundInfo):
            return data
        data = dict(data)
        data["input_messages"] = messages_from_dict(data.get("input_messages") or [])
        return cls(**data)


def fingerprint(message: BaseMessage) -> str:
    """A short digest of a message's type, id and content: equal for the same message however it travelled
    (checkpointed and read back), different for a reply that reuses an earlier id with new content."""
    payload = json.dumps(message_to_dict(message), sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class LeaseReference(str):
    """A digest naming a round's lease without revealing it (lease_reference): given as prepare_round's `lease` by
    a round resumed where the token is not at hand, it renews the lease it names while that is still the round's."""


def lease_reference(lease: str) -> LeaseReference:
    """A digest that names a round's lease without revealing it: what graph state may carry (every stream mode
    and the server's thread state show it), so a round resumed in another process finds its own lease again
    (ConversationMemory.prepare_round's `lease`) while the token itself stays in this process and the database."""
    return LeaseReference("lease:" + hashlib.blake2b(lease.encode("utf-8"), digest_size=16).hexdigest())


def new_messages(messages: Sequence[BaseMessage], known: Sequence[str]) -> list[BaseMessage]:
    """The messages whose fingerprint is not in `known` (what a graph produced beyond what it was given)."""
    seen = set(known)
    return [m for m in messages if fingerprint(m) not in seen]
