"""An import streams: a JSON lines file is read, checked and written a batch at a time, so what it holds does not
grow with the file; it is still one transaction, so a bad line anywhere (the last too) leaves the database as it
was, and a forget_user that comes while it streams erases it whole."""

from __future__ import annotations

import asyncio
import json
import threading
import tracemalloc
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_agent.conversation import imports
from memory_agent.errors import InvalidInputError
from memory_agent.llm.offline import OfflineSummaryModel
from tests.conftest import query
from tests.integration.test_import_thread import NOW, clock, counts, records, stored
from tests.integration.test_transfer_cli import invoke

START = datetime(2023, 1, 1, tzinfo=UTC)


def line(n: int, **fields: Any) -> str:
    record = {
        "role": "user" if n % 2 == 0 else "assistant",
        "content": f"message {n} " + "x" * 150,
        "created_at": (START + timedelta(seconds=n)).isoformat(),
        "id": f"m-{n}",
    }
    return json.dumps({**record, **fields}) + "\n"


def write(path: Path, count: int, last: str | None = None) -> Path:
    """A thread of `count` lines (one id each, a second apart), its last line replaced by `last`."""
    with path.open("w", encoding="utf-8") as out:
        out.writelines(line(n) for n in range(count - 1))
        out.write(last if last is not None else line(count - 1))
    return path


def test_an_import_holds_a_batch_not_the_file(database_url, tmp_path: Path):
    # Read whole, a file of 6,000 lines (1.1 MB) peaked at about 16 MB of Python objects (2.6 kB a message: its
    # text, its LangChain message, its row); streamed, at about 2 MB whatever its length.
    count = 6000
    thread = write(tmp_path / "thread.jsonl", count)
    warm = write(tmp_path / "warm.jsonl", 2)  # the modules an import loads are not the import's memory
    assert (
        invoke(database_url, "import", str(warm), "--thread", "warm", "--user", "ana", "--no-summarize").exit_code == 0
    )
    tracemalloc.start()
    try:
        done = invoke(database_url, "import", str(thread), "--thread", "big", "--user", "ana", "--no-summarize")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert done.exit_code == 0, done.output
    assert peak < 6_000_000, f"an import of {count} lines peaked at {peak / 1e6:.1f} MB"
    rows = query(
        database_url,
        "SELECT count(*), max(sequence_number), max(round_number) FROM memory_agent.messages"
        " WHERE conversation_id = 'big'",
    )
    assert rows == [(count, count - 1, count // 2)]
    conversation = "SELECT next_sequence, round_count, updated_at FROM memory_agent.conversations"
    assert query(database_url, conversation + " WHERE conversation_id = 'big'") == [
        (count, count // 2, START + timedelta(seconds=count - 1))
    ]


@pytest.mark.parametrize(
    ("last", "error"),
    [
        ('{"role": "user", "content": "x"', "line 2500: not JSON"),
        (line(0, id="late", content="late"), "line 2500: field 'created_at' (2023-01-01T00:00:00+00:00) is before"),
        # The id of line 1, written two batches before: the database finds it.
        (line(2499, id="m-0"), "line 2500: field 'id' ('m-0') is message 0's too"),
        (line(2499, role="tool"), "line 2500: field 'tool_call_id' is missing"),
    ],
)
def test_a_bad_last_line_leaves_the_database_as_it_was(database_url, tmp_path: Path, last, error):
    before = counts(database_url)
    thread = write(tmp_path / "thread.jsonl", 2500, last)  # three batches: two written before the last line
    done = invoke(database_url, "import", str(thread), "--thread", "big", "--user", "ana", "--no-summarize")
    assert done.exit_code == 2
    assert f"{thread}, {error}" in " ".join(done.output.split())
    assert counts(database_url) == before
    # Nothing was left of it: not its owner row, not its conversation row. The same thread id imports now.
    write(thread, 2500)
    again = invoke(database_url, "import", str(thread), "--thread", "big", "--user", "ana", "--no-summarize")
    assert again.exit_code == 0, again.output


def test_a_byte_that_is_not_utf8_is_named_by_its_line(database_url, tmp_path: Path):
    # Streamed, the line is named as it is read, after the batches before it were written (and rolled back).
    thread = write(tmp_path / "thread.jsonl", 400)
    lines = thread.read_bytes().split(b"\n")
    lines[299] = lines[299].replace(b"message 299", b"message \xff")
    thread.write_bytes(b"\n".join(lines))
    done = invoke(database_url, "import", str(thread), "--thread", "big", "--user", "ana")
    assert done.exit_code == 2
    assert f"{thread}, line 300: not UTF-8" in " ".join(done.output.split())
    assert counts(database_url) == [0, 0, 0, 0]


async def test_a_forget_while_an_import_streams_erases_it_whole(open_memory, database_url, monkeypatch):
    # Batches of 8: the import has written rows when the forget comes, in a transaction nobody else sees yet.
    monkeypatch.setattr(imports, "IMPORT_BATCH_ROWS", 8)
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    halfway = threading.Event()  # the stream runs on the service's loop, the test on its own

    async def stream() -> AsyncIterator[dict[str, str]]:
        for n, record in enumerate(records(40)):
            if n == 30:
                halfway.set()
                await asyncio.sleep(0.3)  # the forget below starts meanwhile, and waits for the import's lock
            yield record

    importing = asyncio.create_task(memory.transfers.import_messages("mid", stream(), user_id="ana", summarize=False))
    assert await asyncio.to_thread(halfway.wait, 10)
    assert stored(database_url) == []  # three batches written, none visible: one transaction
    forgetting = asyncio.create_task(memory.long_term.forget_user("ana"))
    imported = await importing
    assert imported.messages == 40 and imported.last_at < NOW
    await forgetting
    assert stored(database_url) == []  # the forget came after the import began: it erased the import whole
    assert counts(database_url) == [0, 0, 0, 0]


async def test_a_generator_of_records_imports_as_a_list_does(open_memory, database_url):
    memory = await open_memory(model=OfflineSummaryModel(), clock=clock)
    await memory.transfers.import_messages("listed", records(12), user_id="ana", summarize=False)
    await memory.transfers.import_messages("streamed", iter(records(12)), user_id="bo", summarize=False)
    assert [row[1:] for row in stored(database_url, "bo")] == [row[1:] for row in stored(database_url, "ana")]
    with pytest.raises(InvalidInputError, match="must be a list \\(or an iterable\\) of messages, got dict"):
        await memory.transfers.import_messages("one", records(1)[0], user_id="ana")
