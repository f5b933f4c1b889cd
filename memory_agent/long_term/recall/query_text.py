"""What recall, clustering and the offline embedder read off a text: its CJK runs (one definition of which
characters are CJK), their character bigrams (CJK has no spaces to split words on), and whether a message points
to the past."""

from __future__ import annotations

import re

# Kana, CJK ideographs (and extension A, compatibility ideographs), Hangul syllables.
CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
# A message that points to the past is answered from every conversation of the user, not only this one.
PAST_POINTING = re.compile(
    r"\b(?:before|earlier|previously|last (?:time|week|month|year|session|conversation|chat)|ago|used to|"
    r"remember|recall|you said|(?:i|we) (?:told|said|mentioned|talked|discussed|spoke))\b"
    r"|之前|以前|上次|上回|先前|早先|曾经|記得|记得|前回|この前|以前に|지난번|예전에",
    re.IGNORECASE,
)


def points_to_past(text: str) -> bool:
    return PAST_POINTING.search(text) is not None


def has_cjk(text: str) -> bool:
    return CJK_RUN.search(text) is not None


def cjk_bigrams(text: str, limit: int = 24) -> list[str]:
    """The character bigrams of the CJK runs of `text` (a run shorter than two characters stays whole when it
    is the whole query). Text-search parsers keep a CJK sentence as one token, and a short CJK query has too few
    trigrams for word_similarity to find it inside a sentence."""
    grams: list[str] = []
    for run in CJK_RUN.findall(text):
        if len(run) < 2:
            if len(text.strip()) == 1:
                grams.append(run)
            continue
        grams.extend(run[i : i + 2] for i in range(len(run) - 1))
    return list(dict.fromkeys(grams))[:limit]
