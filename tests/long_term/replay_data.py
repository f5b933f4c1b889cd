"""A made-up conversation in LoCoMo's shape, with the `observation` and `session_summary` fields the replay
summarizer answers with (no third-party data), and the writer of such datasets as the files the eval reads."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any


def write_dataset(tmp_path: Path, data: Any) -> Path:
    """`data` (LoCoMo's samples) as a JSON file of its own in `tmp_path`, as `--dataset` and `--replay` read it."""
    path = tmp_path / f"dataset-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


# A made-up two-session conversation in LoCoMo's shape. The facts use words no turn says ("shelter", "Porto",
# "retired"), so recall can find them only through the items the replayed facts became. Session 2 opens with the
# same "Hi!" as session 1: the session is placed by most of the messages, not by one.
FAKE = [
    {
        "sample_id": "fake-1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "9:00 am on 5 January, 2025",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi!"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Hey Ana, what's new?"},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "I finally brought Biscuit home, the greyhound."},
                {"speaker": "Ben", "dia_id": "D1:4", "text": "Lovely! I started learning the oboe."},
                {"speaker": "Ana", "dia_id": "D1:5", "text": "Fun. See you soon."},
                {"speaker": "Ben", "dia_id": "D1:6", "text": "Bye!"},
            ],
            "session_2_date_time": "9:00 am on 9 January, 2025",
            "session_2": [
                {"speaker": "Ana", "dia_id": "D2:1", "text": "Hi!"},
                {"speaker": "Ben", "dia_id": "D2:2", "text": "How is the dog settling in?"},
                {"speaker": "Ana", "dia_id": "D2:3", "text": "He sleeps all day on the sofa."},
                {"speaker": "Ben", "dia_id": "D2:4", "text": "Ha, typical."},
            ],
        },
        "observation": {
            "session_1_observation": {
                "Ana": [["Ana adopted a retired racing greyhound named Biscuit from a shelter in Porto.", "D1:3"]],
                "Ben": [["Ben is learning to play the oboe.", ["D1:4"]]],
            },
            "session_2_observation": {"Ana": [["Biscuit, Ana's dog, spends the day asleep on the sofa.", "D2:3"]]},
        },
        "session_summary": {
            "session_1_summary": "Ana told Ben about adopting Biscuit; Ben is learning the oboe.",
            "session_2_summary": "Ana said Biscuit sleeps all day.",
        },
        "qa": [
            {"question": "Which shelter in Porto did the retired racer come from?", "evidence": ["D1:3"], "category": 4}
        ],
    }
]
