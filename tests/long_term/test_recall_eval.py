"""`memory-agent eval recall` on tiny LoCoMo-format datasets whose right answers are known."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from memory_agent.cli.eval import register
from memory_agent.evaluation import evaluate, load_dataset
from memory_agent.evaluation.recall import DirectLoad
from memory_agent.long_term.embedders import HashingEmbeddings
from memory_agent.service.backend import MemoryBackend
from tests.long_term.replay_data import write_dataset

# Only trigrams can find the evidence: CJK text is one token for the text-search parser, and the English
# question's one rare word is misspelled. The padding turns share no bigram with the questions.
TRIGRAM_ONLY = [
    {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Li",
            "speaker_b": "Bot",
            "session_1_date_time": "9:00 am on 5 January, 2025",
            "session_1": [
                {"speaker": "Li", "dia_id": "D1:1", "text": "我以前住在里昂。"},
                {"speaker": "Bot", "dia_id": "D1:2", "text": "好的。"},
                {"speaker": "Li", "dia_id": "D1:3", "text": "My cello teacher is Ingrid."},
            ],
            "session_2_date_time": "9:00 am on 9 January, 2025",
            "session_2": [
                {"speaker": "Li", "dia_id": "D2:1", "text": "今天天气很好。"},
                {"speaker": "Bot", "dia_id": "D2:2", "text": "Enjoy the sunshine!"},
            ],
        },
        "qa": [
            {"question": "里昂", "answer": "lived there", "evidence": ["D1:1"], "category": 4},
            {"question": "Ingryd?", "answer": "cello teacher", "evidence": ["D1:3"], "category": 4},
            {"question": "Who is Bob?", "adversarial_answer": "nobody", "evidence": ["D2:1"], "category": 5},
        ],
    }
]


# "Yesterday" is the day before the conversation's last turn: only the date boost, read at that clock, ranks the
# evidence over a shorter turn that matches the same words.
YESTERDAY = [
    {
        "sample_id": "dated",
        "conversation": {
            "speaker_a": "Li",
            "speaker_b": "Bot",
            "session_1_date_time": "9:00 am on 2 January, 2025",
            "session_1": [{"speaker": "Li", "dia_id": "D1:1", "text": "Baked bread!"}],
            "session_2_date_time": "9:00 am on 8 January, 2025",
            "session_2": [
                {
                    "speaker": "Li",
                    "dia_id": "D2:1",
                    "text": "I baked some bread for the neighbours this afternoon, and it took me hours to knead.",
                }
            ],
            "session_3_date_time": "9:00 am on 9 January, 2025",
            "session_3": [
                {"speaker": "Li", "dia_id": "D3:1", "text": "Good morning!"},
                {"speaker": "Bot", "dia_id": "D3:2", "text": "Morning!"},
            ],
        },
        "qa": [{"question": "What bread did Li bake yesterday?", "evidence": ["D2:1"], "category": 2}],
    }
]


async def test_only_trigrams_find_the_evidence(database_url: str, tmp_path: Path) -> None:
    samples = load_dataset(write_dataset(tmp_path, TRIGRAM_ONLY))
    assert [len(s.turns) for s in samples[0].sessions] == [3, 2]
    pool = MemoryBackend.create_pool(database_url)
    await pool.open(wait=True)
    try:
        report = await evaluate(
            MemoryBackend(pool), samples, direct=DirectLoad(embedder=HashingEmbeddings()), per_path=True
        )
    finally:
        await pool.close()
    assert report.questions == 2  # the adversarial question is not scored
    figures = report.as_dict()
    assert figures["per_path"]["fts"]["@10"] == 0.0
    assert figures["per_path"]["trgm"]["@1"] == 1.0 and figures["recall"]["@1"] == 1.0
    assert figures["categories"]["single-hop"]["questions"] == 2
    assert figures["contributed"]["trgm"] == 2 and "fts" not in figures["contributed"]
    assert figures["block_tokens"]["mean"] > 0
    assert figures["latency_ms"]["p95"] >= figures["latency_ms"]["p50"] > 0


async def test_questions_are_asked_at_the_clock_of_the_conversation_s_last_turn(
    database_url: str, tmp_path: Path
) -> None:
    pool = MemoryBackend.create_pool(database_url)
    await pool.open(wait=True)
    try:
        report = await evaluate(MemoryBackend(pool), load_dataset(write_dataset(tmp_path, YESTERDAY)))
    finally:
        await pool.close()
    assert report.as_dict()["recall"]["@1"] == 1.0  # at the real clock, 8 January 2025 is no "yesterday"


# The question matches the question turn only; the answer after it is the evidence, shown as its neighbour. Long,
# the answer is cut at the neighbour cap in the block: the model does not read it, whatever the provenance says.
def _neighbour_answer(sample_id: str, answer: str) -> list[dict[str, object]]:
    return [
        {
            "sample_id": sample_id,
            "conversation": {
                "speaker_a": "Li",
                "speaker_b": "Bot",
                "session_1_date_time": "9:00 am on 5 January, 2025",
                "session_1": [
                    # Not a question: a recalled question is shown as its reply (recall/replies.py), and here the
                    # answer must be the matching turn's neighbour.
                    {"speaker": "Bot", "dia_id": "D1:1", "text": "Tell me all about the trip to Lisbon."},
                    {"speaker": "Li", "dia_id": "D1:2", "text": answer},
                ],
            },
            "qa": [{"question": "Lisbon trip?", "evidence": ["D1:2"], "category": 4}],
        }
    ]


async def test_in_the_block_counts_only_turns_shown_whole(database_url: str, tmp_path: Path) -> None:
    short = "Wonderful: we ate custard tarts every morning."
    long = short + " " + " ".join(f"Then day {n} was spent walking the old quarter slowly." for n in range(8))
    # A long chat turn (2 % of LoCoMo's are over 300 characters): cut at 300 until the default became 400, the
    # model read its start and not the part that answers.
    chat = short + " " + " ".join(f"Then day {n} was spent walking the old quarter slowly." for n in range(5))
    assert len(short) < 300 < len(chat) < 400 < len(long)
    pool = MemoryBackend.create_pool(database_url)
    await pool.open(wait=True)
    try:
        figures = {}
        for name, answer in (("short", short), ("chat", chat), ("long", long)):
            samples = load_dataset(write_dataset(tmp_path, _neighbour_answer(name, answer)))
            figures[name] = (await evaluate(MemoryBackend(pool), samples)).as_dict()["recall"]
    finally:
        await pool.close()
    # Found either way (the matching turn's hit shows the answer as a neighbour); in the model's input only whole.
    assert figures["short"]["@1"] == figures["long"]["@1"] == 1.0
    assert figures["short"]["in_block"] == figures["chat"]["in_block"] == 1.0
    assert figures["long"]["in_block"] == 0.0


def test_the_command_prints_the_figures(server_url: str, tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    dataset = write_dataset(tmp_path, TRIGRAM_ONLY)
    result = CliRunner().invoke(
        app, ["eval", "recall", "--dataset", str(dataset), "--json", "--database-url", server_url]
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert figures["questions"] == 2 and figures["recall"]["@5"] == 1.0
    table = CliRunner().invoke(
        app, ["eval", "recall", "--dataset", str(dataset), "--database-url", server_url, "--embedder", "none"]
    )
    assert table.exit_code == 0 and "single-hop" in table.output and "p95" in table.output
    # Loaded through the service's rounds with an embedder: after its background work (the drain), no turn of the
    # dataset is without a vector, and the catch-up finds none either; the published form is over all five categories (the adversarial one too).
    hashing = CliRunner().invoke(
        app,
        ["eval", "recall", "--dataset", str(dataset), "--json", "--database-url", server_url, "--embedder", "hashing"],
    )
    assert hashing.exit_code == 0, hashing.output
    figures = json.loads(hashing.output)
    assert figures["turns_without_vector"] == {"after_drain": 0, "after_catch_up": 0}
    assert figures["settings"]["loaded"] == "rounds through the service"
    assert figures["evidence_fraction_all_categories"]["questions"] == 3
    assert figures["recall"]["own_turn"]["@1"] == 1.0
    # A corrected evidence key replaces the dataset's: the cello question's evidence moved to a turn it misses.
    key = tmp_path / "key.json"
    key.write_text(json.dumps({"Ingryd?": ["D2:2"]}), encoding="utf-8")
    corrected = CliRunner().invoke(
        app,
        [
            *("eval", "recall", "--dataset", str(dataset), "--json", "--database-url", server_url),
            *("--embedder", "none", "--evidence-key", str(key)),
        ],
    )
    assert corrected.exit_code == 0, corrected.output
    assert json.loads(corrected.output)["recall"]["@1"] == 0.5
    key.write_text(json.dumps({"Ingryd?": "D2:2"}), encoding="utf-8")
    refused = CliRunner().invoke(
        app, ["eval", "recall", "--dataset", str(dataset), "--database-url", server_url, "--evidence-key", str(key)]
    )
    assert refused.exit_code == 2 and "question → list of dia ids" in refused.output
    bad = write_dataset(tmp_path, [{"sample_id": "x", "conversation": {}}])
    failed = CliRunner().invoke(app, ["eval", "recall", "--dataset", str(bad), "--database-url", server_url])
    assert failed.exit_code == 2 and "speaker_a" in failed.output


def test_an_evidence_key_naming_what_the_dataset_lacks_is_refused(tmp_path: Path) -> None:
    # A misspelt question or a dia id no turn has would be scored as evidence never found: wrong figures, no error.
    app = typer.Typer()
    register(app)
    dataset = write_dataset(tmp_path, TRIGRAM_ONLY)
    key = tmp_path / "key.json"
    # No --database-url: the key is checked before a server is started or anything loaded.
    for entries, error in (
        ({"Ingrid?": ["D1:3"]}, "the evidence key names a question the dataset does not have: 'Ingrid?'"),
        ({"Ingryd?": ["D1:3", "D9:1"]}, "question 'Ingryd?': 'D9:1' is no turn of its conversation"),
    ):
        key.write_text(json.dumps(entries), encoding="utf-8")
        result = CliRunner().invoke(
            app, ["eval", "recall", "--dataset", str(dataset), "--evidence-key", str(key), "--embedder", "none"]
        )
        assert result.exit_code == 2, result.output
        assert error in result.output
        assert "Traceback" not in result.output
