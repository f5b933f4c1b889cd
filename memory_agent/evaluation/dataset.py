"""The LoCoMo-format dataset: samples (one user each) of sessions (one conversation each) of turns, and the scored
questions with their evidence turns."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_agent.errors import InvalidInputError

_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"^session_(\d+)$")
EVAL_TENANT = "eval"


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass
class Session:
    number: int
    started_at: datetime
    turns: list[Turn]


@dataclass
class Question:
    question: str
    evidence: list[str]
    category: int | None


@dataclass
class Sample:
    sample_id: str
    speaker_a: str
    sessions: list[Session]
    questions: list[Question]


def parse_session_time(text: str | None, fallback: datetime) -> datetime:
    """LoCoMo dates are free text ("1:56 pm on 8 May, 2023"); unparseable ones fall back to a day after the last."""
    for pattern in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime((text or "").strip(), pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    return fallback


def parse_sample(raw: dict[str, Any], index: int) -> Sample:
    conversation = raw.get("conversation", raw)
    if "speaker_a" not in conversation:
        raise InvalidInputError(f"sample {index}: no speaker_a (is this a LoCoMo-format dataset?)")
    sessions: list[Session] = []
    clock = datetime(2023, 1, 1, tzinfo=UTC)
    for key in sorted((k for k in conversation if _SESSION.match(k)), key=lambda k: int(k.split("_")[1])):
        number = int(key.split("_")[1])
        clock = parse_session_time(conversation.get(f"{key}_date_time"), clock + timedelta(days=1))
        turns = [Turn(t["dia_id"], t["speaker"], t.get("text", "")) for t in conversation[key] if t.get("text")]
        sessions.append(Session(number, clock, turns))
    questions = []
    for qa in raw.get("qa", []):
        evidence = [f"D{s}:{t}" for s, t in _EVIDENCE.findall(" ".join(qa.get("evidence", [])))]
        questions.append(Question(qa["question"], evidence, qa.get("category")))
    return Sample(str(raw.get("sample_id", f"sample-{index}")), conversation["speaker_a"], sessions, questions)


def load_dataset(path: Path) -> list[Sample]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"cannot read the dataset {path}: {exc}") from exc
    samples = data if isinstance(data, list) else [data]
    return [parse_sample(raw, i) for i, raw in enumerate(samples)]


def scored(question: Question) -> bool:
    return question.category != 5 and bool(question.evidence)
