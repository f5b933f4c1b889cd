"""Writing a user's memory document (document.py) into this database, for a user of a tenant.

All or nothing, in one transaction: a document of another format or version, a record without a field it needs or
a value the tables refuse raises InvalidInputError naming the record (`items[3]`) and field, and nothing is
written. The user must hold no memory yet in the tenant (no merge); the transaction holds the user's forget lock
exclusively, so a forget_user or another import of the user waits for it (and a forget that comes after erases the
import whole). Rows get new ids; every reference to one (a version's base, a summary's members, a source's
version, a note's sources, a batch's items) follows, and an id the document names without its row (a forgotten
item a batch summary stands for) gets a fresh id of its table, naming no row here. Conversation ids are kept, after
`conversation_prefix`: a thread id belongs to one user in a database.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import psycopg
from langchain_core.messages import messages_from_dict
from psycopg.types.json import Jsonb

from memory_agent.conversation.imports import parse_time
from memory_agent.conversation.messages import validate_conversation_id
from memory_agent.errors import InvalidInputError
from memory_agent.long_term.tenancy import set_tenant
from memory_agent.transfer.document import COLUMNS, FORMAT, SCHEMA_VERSION, SECTIONS
from memory_agent.transfer.ids import Ids
from memory_agent.transfer.queries import QUERIES as Q

TIMES = {
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "valid_from",
    "valid_to",
    "compacted_at",
    "summarized_from",
    "summarized_until",
    "last_run",
    "next_run",
}
DAYS = {"period_start", "period_end", "covered_until"}
JSON = {"message", "items", "value", "insights"}


@dataclass
class ImportedUser:
    """What import_user wrote, and the new id of every id of the document (memory versions, items, notes)."""

    tenant_id: str
    user_id: str
    counts: dict[str, int] = field(default_factory=dict)
    memory_ids: dict[int, int] = field(default_factory=dict)
    item_ids: dict[int, int] = field(default_factory=dict)
    note_ids: dict[int, int] = field(default_factory=dict)


def _records(document: Mapping[str, Any], section: str) -> list[dict[str, Any]]:
    records = document.get(section, [])
    if not isinstance(records, list) or not all(isinstance(record, dict) for record in records):
        raise InvalidInputError(f"document field {section!r} must be a list of objects")
    return records


def _row(record: Mapping[str, Any], names: Sequence[str], where: str) -> dict[str, Any]:
    """The fields `names` of `record`, times and days parsed, JSON wrapped for jsonb."""
    row: dict[str, Any] = {}
    for name in names:
        if name not in record:
            raise InvalidInputError(f"{where}: field {name!r} is missing")
        value = record[name]
        if value is not None and name in TIMES:
            value = _time(value, name, where)
        elif value is not None and name in DAYS:
            try:
                value = date.fromisoformat(value)
            except (TypeError, ValueError):
                raise InvalidInputError(f"{where}: field {name!r} is {value!r}, not an ISO 8601 day") from None
        elif name in JSON:
            value = None if value is None else Jsonb(value)
        row[name] = value
    return row


def _time(value: Any, name: str, where: str) -> datetime:
    try:
        return parse_time(value, where)
    except InvalidInputError as exc:
        raise InvalidInputError(str(exc).replace("'created_at'", repr(name))) from None


def check_document(document: Any) -> None:
    if not isinstance(document, Mapping):
        raise InvalidInputError(f"a user document is a JSON object, got {type(document).__name__}")
    if document.get("format") != FORMAT or document.get("schema_version") != SCHEMA_VERSION:
        raise InvalidInputError(
            f"not a user document this version reads: format {document.get('format')!r} version "
            f"{document.get('schema_version')!r}; expected {FORMAT!r} version {SCHEMA_VERSION} (export it again "
            "with `memory-agent export --user`)"
        )
    unknown = sorted(set(document) - {"format", "schema_version", "tenant_id", "user_id", *(s for s, _ in SECTIONS)})
    if unknown:
        raise InvalidInputError(f"unknown document field {unknown[0]!r}")


async def write_user(
    conn: psycopg.AsyncConnection[Any],
    document: Mapping[str, Any],
    *,
    tenant_id: str,
    user_id: str,
    conversation_prefix: str = "",
) -> ImportedUser:
    """Write `document` as the memory of (tenant_id, user_id), in one transaction on `conn`."""
    check_document(document)
    who = {"tenant_id": tenant_id, "user_id": user_id}
    report = ImportedUser(tenant_id, user_id)
    async with conn.transaction():
        await set_tenant(conn, tenant_id)
        await Q.lock_forget(conn, who)
        if await Q.tenant_user_known(conn, who):  # read after the lock: a forget has committed
            raise InvalidInputError(
                f"user {user_id!r} of tenant {tenant_id!r} holds memory already; import into a user without any "
                "(or forget_user first)"
            )
        where = ""
        try:
            writer = _Writer(conn, who, conversation_prefix, report)
            for section, _ in SECTIONS:
                for position, record in enumerate(_records(document, section)):
                    where = f"{section}[{position}]"
                    await getattr(writer, section)(record, where)
            await writer.finish()
        except (psycopg.errors.IntegrityError, psycopg.errors.DataError) as exc:
            raise InvalidInputError(
                f"{where or 'the document'}: the database refused it ({exc.diag.message_primary}); nothing was imported"
            ) from None
        report.counts = {section: len(_records(document, section)) for section, _ in SECTIONS}
    return report


class _Writer:
    """One method a section: writes one record (in the order SECTIONS gives: what a record names comes first)."""

    def __init__(
        self, conn: psycopg.AsyncConnection[Any], who: dict[str, str], prefix: str, report: ImportedUser
    ) -> None:
        self.conn, self.who, self.prefix = conn, who, prefix
        self.memory_ids = Ids(conn, "memory", "memory_id", report.memory_ids)
        self.item_ids = Ids(conn, "items", "item_id", report.item_ids)
        self.note_ids = Ids(conn, "consolidation_notes", "note_id", report.note_ids)
        self.members: list[tuple[int, Any, str]] = []
        self.messages_of: dict[str, list[dict[str, Any]]] = {}

    def thread(self, conversation_id: Any, where: str) -> str:
        if not isinstance(conversation_id, str) or not conversation_id:
            raise InvalidInputError(f"{where}: field 'conversation_id' must be a non-empty string")
        try:  # a thread id a round could continue (no NUL, at most 1024 bytes with the prefix)
            return validate_conversation_id(self.prefix + conversation_id)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{where}: field 'conversation_id': {exc}") from None

    async def conversations(self, record: dict[str, Any], where: str) -> None:
        row = _row(record, COLUMNS["conversations"], where)
        row["conversation_id"] = self.thread(row["conversation_id"], where)
        if row["conversation_id"] in self.messages_of:
            raise InvalidInputError(f"{where}: conversation {row['conversation_id']!r} is in the document twice")
        owner = await Q.import_owner(self.conn, {**self.who, **row, "now": row["created_at"]})
        if owner is None or (owner["tenant_id"], owner["user_id"]) != (self.who["tenant_id"], self.who["user_id"]):
            raise InvalidInputError(
                f"{where}: thread id {row['conversation_id']!r} belongs to another user of this database; give "
                "the threads a prefix: import_user(..., conversation_prefix='...') or `memory-agent import-user "
                "--conversation-prefix ...`"
            )
        self.messages_of[row["conversation_id"]] = []
        await Q.import_conversation(self.conn, {**self.who, **row, "next_sequence": 0, "now": row["created_at"]})

    async def messages(self, record: dict[str, Any], where: str) -> None:
        row = _row(record, COLUMNS["messages"], where)
        row["conversation_id"] = self.thread(row["conversation_id"], where)
        if row["conversation_id"] not in self.messages_of:
            raise InvalidInputError(f"{where}: its conversation is not among the document's conversations")
        try:  # a round reads it back as a LangChain message
            messages_from_dict([record["message"]])
        except Exception as exc:
            raise InvalidInputError(f"{where}: field 'message' is not a LangChain message dict ({exc})") from None
        row["message"] = json.dumps(record["message"], ensure_ascii=False)
        self.messages_of[row["conversation_id"]].append({**self.who, **row})

    async def memory_versions(self, record: dict[str, Any], where: str) -> None:
        if self.messages_of:  # every message is read: stored before the versions that cover them
            await self._flush_messages()
        row = _row(record, COLUMNS["memory_versions"], where)
        if row["status"] not in ("completed", "failed"):  # a summary in progress is not a version to carry over
            raise InvalidInputError(f"{where}: field 'status' is {row['status']!r}; a version is completed or failed")
        row["conversation_id"] = self.thread(row["conversation_id"], where)
        self.memory_ids.check_new(record["memory_id"], where, "memory_id")
        row["base_memory_id"] = await self.memory_ids.one(row["base_memory_id"], where, "base_memory_id")
        created = await Q.import_memory(self.conn, {**self.who, **row})
        assert created is not None
        self.memory_ids.define(record["memory_id"], created["memory_id"], where, "memory_id")

    async def items(self, record: dict[str, Any], where: str) -> None:
        await self._flush_messages()
        row = _row(record, COLUMNS["items"], where)
        self.item_ids.check_new(row["item_id"], where, "item_id")
        created = await Q.import_item(self.conn, {**self.who, **row})
        assert created is not None
        self.item_ids.define(record["item_id"], created["item_id"], where, "item_id")
        if row["source_item_ids"]:
            self.members.append((created["item_id"], row["source_item_ids"], where))

    async def item_sources(self, record: dict[str, Any], where: str) -> None:
        await self._flush_members()
        row = _row(record, COLUMNS["item_sources"], where)
        row["item_id"] = self.item_ids.of_record(row["item_id"], where, "item_id")
        if row["conversation_id"] is not None:
            row["conversation_id"] = self.thread(row["conversation_id"], where)
        row["memory_id"] = await self.memory_ids.one(row["memory_id"], where, "memory_id")
        await Q.import_item_source(self.conn, {**self.who, **row})

    async def consolidation_notes(self, record: dict[str, Any], where: str) -> None:
        await self._flush_members()
        row = _row(record, COLUMNS["consolidation_notes"], where)
        self.note_ids.check_new(record["note_id"], where, "note_id")
        row["source_item_ids"] = await self.item_ids.many(row["source_item_ids"], where, "source_item_ids")
        row["source_memory_ids"] = await self.memory_ids.many(row["source_memory_ids"], where, "source_memory_ids")
        row["source_note_ids"] = await self.note_ids.many(row["source_note_ids"], where, "source_note_ids")
        row["source_conversation_ids"] = self._threads(row["source_conversation_ids"], where)
        created = await Q.import_note(self.conn, {**self.who, **row})
        assert created is not None
        self.note_ids.define(record["note_id"], created["note_id"], where, "note_id")

    async def batch_summaries(self, record: dict[str, Any], where: str) -> None:
        await self._flush_members()
        row = _row(record, COLUMNS["batch_summaries"], where)
        row["first_item_id"] = await self.item_ids.one(row["first_item_id"], where, "first_item_id")
        row["summarized_ids"] = await self.item_ids.many(row["summarized_ids"], where, "summarized_ids")
        row["source_conversation_ids"] = self._threads(row["source_conversation_ids"], where)
        await Q.import_batch_summary(self.conn, {**self.who, **row})

    async def consolidation_schedules(self, record: dict[str, Any], where: str) -> None:
        await self._flush_members()
        row = _row(record, COLUMNS["consolidation_schedules"], where)
        await Q.import_schedule(self.conn, {**self.who, **row})

    def _threads(self, ids: list[Any] | None, where: str) -> list[str] | None:
        return None if ids is None else [self.thread(value, where) for value in ids]

    async def _flush_messages(self) -> None:
        """The messages gathered, per conversation (its next sequence set after them)."""
        for conversation_id, rows in self.messages_of.items():
            if rows:
                try:
                    await Q.import_messages(self.conn, rows)
                except (psycopg.errors.IntegrityError, psycopg.errors.DataError) as exc:
                    raise InvalidInputError(
                        f"messages of conversation {conversation_id!r}: the database refused them "
                        f"({exc.diag.message_primary}); nothing was imported"
                    ) from None
                next_sequence = max(row["sequence_number"] for row in rows) + 1
                await Q.import_next_sequence(
                    self.conn,
                    {**self.who, "conversation_id": conversation_id, "next_sequence": next_sequence},
                )
            rows.clear()

    async def _flush_members(self) -> None:
        """Cluster summaries' members, once every item has its new id."""
        for item_id, members, where in self.members:
            mapped = await self.item_ids.many(members, where, "source_item_ids")
            await Q.import_item_members(self.conn, {**self.who, "item_id": item_id, "source_item_ids": mapped})
        self.members.clear()

    async def finish(self) -> None:
        await self._flush_messages()
        await self._flush_members()
