"""The replay summarizer: a LoCoMo-shaped file's LLM-written facts and session summaries answered through the
service's own summary calls, written as long-term items and found by recall."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memory_agent.cli.eval import register
from memory_agent.errors import InvalidInputError
from memory_agent.evaluation import EVAL_TENANT, load_dataset
from memory_agent.evaluation.replay import REPLAY_SUMMARIZER, ReplaySummaryModel
from memory_agent.evaluation.rounds import ReplayClock, load_through_rounds
from memory_agent.long_term.recall.round_start import round_recall
from memory_agent.schemas.keys import ConversationKey
from tests.long_term.replay_data import FAKE, write_dataset


async def test_replayed_facts_become_items_that_recall_finds(open_memory, tmp_path: Path) -> None:
    path = write_dataset(tmp_path, FAKE)
    model = ReplaySummaryModel.from_file(path)
    clock = ReplayClock(datetime(2025, 1, 1, tzinfo=UTC))
    memory = await open_memory(model=model, clock=clock, executor="inline", event_loop="caller", long_term=True)
    (sample,) = load_dataset(path)
    provenance = await load_through_rounds(memory, sample, clock)

    items = await memory.long_term.list_items("fake-1", tenant_id=EVAL_TENANT)
    facts = {item.content: item for item in items if item.item_type == "fact"}
    # Written by the long-term writer from the summaries the service asked the replay model for.
    assert "Ana adopted a retired racing greyhound named Biscuit from a shelter in Porto." in facts
    assert "Ben is learning to play the oboe." in facts
    assert model.stats["calls"] >= 1 and model.stats["calls_placed"] == model.stats["calls"]
    assert model.stats.get("messages_unplaced", 0) == 0
    adopted = facts["Ana adopted a retired racing greyhound named Biscuit from a shelter in Porto."]
    assert adopted.key == "ana"

    key = ConversationKey("fake-1:question", "fake-1", EVAL_TENANT)
    recalled = await round_recall(memory.backend, key, FAKE[0]["qa"][0]["question"], memory.settings.recall)
    assert recalled.result is not None
    first = recalled.result.ranked[0]
    assert first.kind == "item" and "shelter in Porto" in first.text
    # The item points at the turn it came from: the evidence turn, as the evaluation scores it.
    assert {provenance[source] for source in first.sources} == {"D1:3"}


async def test_a_summary_is_the_sessions_facts_then_its_summary(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from memory_agent.summarize.agent import MemoryAgent, SequencedMessage

    agent = MemoryAgent(ReplaySummaryModel.from_file(write_dataset(tmp_path, FAKE)))
    turns = FAKE[0]["conversation"]["session_1"]
    messages = [
        SequencedMessage(n, (HumanMessage if t["speaker"] == "Ana" else AIMessage)(t["text"]))
        for n, t in enumerate(turns)
    ]
    first = await agent.summarize(
        previous_summary=None, base_end_sequence=None, new_messages=messages[:3], window_start_seq=0, window_end_seq=2
    )
    assert first.text == "Ana adopted a retired racing greyhound named Biscuit from a shelter in Porto."
    assert [(i.content, i.source_sequences) for i in first.items.facts] == [(first.text, [2])]
    last = await agent.summarize(
        previous_summary=first.text,
        base_end_sequence=2,
        new_messages=messages[3:],
        window_start_seq=0,
        window_end_seq=5,
    )
    # The session's last turn is in: its summary; each fact once (Ben's now, Ana's was the first summary's).
    assert last.text == FAKE[0]["session_summary"]["session_1_summary"]
    assert [i.content for i in last.items.facts] == ["Ben is learning to play the oboe."]


def test_the_command_measures_with_the_replay_summarizer(server_url: str, tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    dataset = write_dataset(tmp_path, FAKE)
    args = ["eval", "recall", "--dataset", str(dataset), "--database-url", server_url, "--embedder", "none"]
    result = CliRunner().invoke(app, [*args, "--json", "--summarizer", "replay"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert figures["settings"]["summarizer"] == "replay"
    assert figures["volume"]["items"] >= 2 and figures["volume"]["items_per_summary"] > 0
    assert figures["volume"]["replay"]["items"] == figures["volume"]["items"]
    assert figures["recall"]["@1"] == 1.0
    # The same load with the offline summarizer: no item, and the question's words are in no turn.
    offline = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    assert offline["settings"]["summarizer"] == "offline" and offline["volume"]["items"] == 0
    assert offline["recall"]["@10"] == 0.0
    wrong = CliRunner().invoke(app, [*args, "--summarizer", "gpt"])
    assert wrong.exit_code != 0 and "offline or replay" in wrong.output
    bare = write_dataset(tmp_path, [{k: v for k, v in FAKE[0].items() if k not in ("observation", "session_summary")}])
    refused = CliRunner().invoke(app, ["eval", "recall", "--dataset", str(bare), "--summarizer", "replay"])
    assert refused.exit_code == 2 and "observation" in refused.output


def test_messages_of_no_one_session_are_not_placed(tmp_path: Path) -> None:
    model = ReplaySummaryModel.from_file(write_dataset(tmp_path, FAKE))
    assert model.model_name == REPLAY_SUMMARIZER
    # "Hi!" opens both sessions: which one it is cannot be told, so no session's facts are answered.
    prompt = "New messages (sequences 0-0):\n[seq 0] user: Hi!\n\nWrite the updated memory for the window 0-0."
    assert model.replay(prompt, 250)["facts"] == []
    unknown = "New messages (sequences 4-4):\n[seq 4] user: Something else entirely\n\nWrite the updated memory"
    assert model.replay(unknown, 250) == {"summary": "(no replayed facts for these messages)", "facts": []}
    assert model.stats == {"calls": 2, "messages_unplaced": 2}


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="cannot read the replay data"):
        ReplaySummaryModel.from_file(tmp_path / "missing.json")
