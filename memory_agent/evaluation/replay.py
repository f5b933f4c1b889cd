"""The replay summarizer: a chat model that answers a summary request with the facts and summaries a language model
wrote for those messages beforehand, so the long-term tier is measured on a real model's volume of items.

A LoCoMo-format file carries, beside the turns, LLM-written `observation`s (per session, per speaker: a fact and
the dia ids of the turns it came from) and a `session_summary` per session. The model is called by the service
exactly as a real one: bound to the MemorySummaryOutput tool, sent the summary prompt. It reads only what that
prompt shows (the new messages' sequence numbers and texts), finds the session whose turns those texts are (the
session most of them belong to), and answers:

- items: one `facts` item per observation whose evidence turns are all among the messages seen by now and whose
  last evidence turn is among the new messages (each observation once, with the new messages it came from as its
  `source_sequences`), keyed by its speaker, values adding up (`single_valued` false);
- summary: the session's summary once the new messages reach the session's last turn, else the session's facts
  seen so far, the latest ones within the prompt's word limit.

Messages it cannot place (no session has them, or two have as many of them) are answered with no items and a
summary that says so (counted in `stats`). Cluster
summaries and consolidation are the offline model's (it is an OfflineModel): the file has no answer for them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

from memory_agent.errors import InvalidInputError
from memory_agent.llm.offline import SUMMARY_TOOL, OfflineModel, counted_tool_call

REPLAY_SUMMARIZER = "replay-summarizer"
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_NEW = re.compile(r"^New messages \(sequences (\d+)-(\d+)\):\n", re.MULTILINE)
_END = "\n\nWrite the updated memory for the window"
_LINE = re.compile(r"^\[seq (\d+)\] (?:user|assistant): ", re.MULTILINE)
_WORDS = re.compile(r"At most (\d+) words")


def _norm(text: str) -> str:
    return " ".join(str(text).split())


@dataclass
class ReplaySession:
    """One session of the file: its turns' dia ids in order, its facts (speaker, text, evidence dia ids in
    session order) and its summary."""

    dia_ids: list[str]
    facts: list[tuple[str, str, list[str]]] = field(default_factory=list)
    summary: str = ""


def _evidence(value: Any) -> list[str]:
    text = " ".join(value) if isinstance(value, list) else str(value)
    return [f"D{s}:{t}" for s, t in _EVIDENCE.findall(text)]


def load_replay(path: Path) -> tuple[dict[tuple[str, int], ReplaySession], dict[str, list[tuple[str, int, str]]]]:
    """The sessions of a LoCoMo-format file with their facts and summaries, and the index of turn text → (sample,
    session, dia id). InvalidInputError when the file cannot be read or holds no `observation` and no
    `session_summary`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"cannot read the replay data {path}: {exc}") from exc
    sessions: dict[tuple[str, int], ReplaySession] = {}
    index: dict[str, list[tuple[str, int, str]]] = {}
    answers = 0
    for position, raw in enumerate(data if isinstance(data, list) else [data]):
        if not isinstance(raw, dict):
            raise InvalidInputError(f"the replay data {path}: sample {position} is not an object")
        conversation = raw.get("conversation", raw)
        sample = str(raw.get("sample_id", f"sample-{position}"))
        for key, turns in conversation.items():
            match = re.fullmatch(r"session_(\d+)", key)
            if not match or not isinstance(turns, list):
                continue
            number = int(match.group(1))
            kept = [t for t in turns if isinstance(t, dict) and t.get("text") and t.get("dia_id")]
            sessions[(sample, number)] = ReplaySession([str(t["dia_id"]) for t in kept])
            for turn in kept:
                index.setdefault(_norm(turn["text"]), []).append((sample, number, str(turn["dia_id"])))
        for key, speakers in (raw.get("observation") or {}).items():
            found = re.fullmatch(r"session_(\d+)_observation", key)
            session = sessions.get((sample, int(found.group(1)))) if found else None
            if session is None or not isinstance(speakers, dict):
                continue
            order = {dia: n for n, dia in enumerate(session.dia_ids)}
            for speaker, facts in speakers.items():
                for fact in facts if isinstance(facts, list) else []:
                    if not isinstance(fact, list) or len(fact) < 2 or not str(fact[0]).strip():
                        continue
                    evidence = sorted({d for d in _evidence(fact[1]) if d in order}, key=order.__getitem__)
                    if evidence:  # a fact whose turns are not in its session cannot be placed
                        session.facts.append((str(speaker), _norm(fact[0]), evidence))
                        answers += 1
        for key, text in (raw.get("session_summary") or {}).items():
            found = re.fullmatch(r"session_(\d+)_summary", key)
            if found and (sample, int(found.group(1))) in sessions and str(text).strip():
                sessions[(sample, int(found.group(1)))].summary = _norm(text)
                answers += 1
    if not answers:
        raise InvalidInputError(
            f"the replay data {path} has no `observation` or `session_summary` of its sessions: the replay "
            "summarizer needs a LoCoMo-format file with them (LoCoMo's own file has both)"
        )
    return sessions, index


def _new_messages(prompt: str) -> list[tuple[int, str]]:
    """(sequence, text) of the prompt's new messages."""
    header = _NEW.search(prompt)
    if header is None:
        return []
    end = prompt.rfind(_END)
    section = prompt[header.end() : end if end > header.end() else len(prompt)]
    starts = list(_LINE.finditer(section))
    return [
        (int(m.group(1)), _norm(section[m.end() : starts[n + 1].start() if n + 1 < len(starts) else len(section)]))
        for n, m in enumerate(starts)
    ]


def _within(lines: list[str], max_words: int) -> str:
    """The last of `lines` that fit in `max_words` words, in order (at least the last one, cut)."""
    kept: list[str] = []
    words = 0
    for line in reversed(lines):
        count = len(line.split())
        if words + count > max_words:
            if not kept:
                kept.append(" ".join(line.split()[:max_words]))
            break
        kept.append(line)
        words += count
    return "\n".join(reversed(kept))


class ReplaySummaryModel(OfflineModel):
    """The replay summarizer (module docstring). `stats`: calls, placed calls, new messages placed and not, items
    answered."""

    model_name: str = REPLAY_SUMMARIZER
    sessions: dict[Any, Any] = Field(default_factory=dict, repr=False)
    text_index: dict[str, Any] = Field(default_factory=dict, repr=False)
    stats: dict[str, int] = Field(default_factory=dict)

    @classmethod
    def from_file(cls, path: Path) -> ReplaySummaryModel:
        sessions, index = load_replay(path)
        return cls(sessions=sessions, text_index=index)

    @property
    def _llm_type(self) -> str:
        return "memory-agent-replay"

    def _count(self, name: str, n: int) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def replay(self, prompt: str, max_words: int) -> dict[str, Any]:
        """The MemorySummaryOutput arguments for a summary prompt (module docstring)."""
        lines = _new_messages(prompt)
        votes = Counter((sample, number) for _, text in lines for sample, number, _ in self.text_index.get(text, []))
        self._count("calls", 1)
        ranked = votes.most_common(2)
        if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
            # No session, or two sessions as likely (only lines such as "Hi!"): nothing is placed rather than
            # another conversation's facts.
            self._count("messages_unplaced", len(lines))
            return {"summary": "(no replayed facts for these messages)", "facts": []}
        (sample, number), _ = ranked[0]
        session: ReplaySession = self.sessions[(sample, number)]
        order = {dia: n for n, dia in enumerate(session.dia_ids)}
        placed: dict[str, int] = {}  # dia id → sequence
        last = -1
        for sequence, text in lines:
            candidates = [order[d] for s, n, d in self.text_index.get(text, []) if (s, n) == (sample, number)]
            if not candidates:
                self._count("messages_unplaced", 1)
                continue
            # A text said twice in the session: the first occurrence after the previous message's.
            position = min((c for c in candidates if c > last), default=candidates[0])
            placed[session.dia_ids[position]] = sequence
            last = max(last, position)
        self._count("calls_placed", 1)
        self._count("messages_placed", len(placed))
        facts = [
            {
                "key": speaker,
                "content": text,
                "importance": 0.5,
                "source_sequences": sorted({placed[d] for d in evidence if d in placed}),
                "single_valued": False,
            }
            for speaker, text, evidence in session.facts
            if evidence[-1] in placed and order[evidence[-1]] <= last
        ]
        self._count("items", len(facts))
        if last == len(session.dia_ids) - 1 and session.summary:
            summary = _within([session.summary], max_words)
        else:
            seen = [text for _, text, evidence in session.facts if order[evidence[-1]] <= last]
            summary = _within(seen, max_words) or "(no facts in these messages yet)"
        return {"summary": summary, "facts": facts}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.tool_name != SUMMARY_TOOL:  # consolidation: the offline model's
            return super()._generate(messages, stop, run_manager, **kwargs)
        prompt = "\n".join(str(m.text) for m in messages)
        words = _WORDS.search(prompt)
        return counted_tool_call(messages, SUMMARY_TOOL, self.replay(prompt, int(words.group(1)) if words else 250))
