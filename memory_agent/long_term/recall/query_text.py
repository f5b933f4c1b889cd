"""What recall, clustering and the offline embedder read off a text: its CJK runs (one definition of which
characters are CJK), their character bigrams (CJK has no spaces to split words on), whether a message points
to the past, and the bounds of what recall searches and embeds."""

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


# Closing punctuation of a question or sentence, ASCII and CJK.
CLOSING_PUNCTUATION = "?!.;:…。？！；："


def cut_at_word(text: str, end: int) -> str:
    """`text` cut at `end`, after a word when the cut falls inside one (a single word longer than that is cut where
    it is), trailing white space dropped."""
    cut = text[:end]
    inside_a_word = 0 < end < len(text) and not text[end].isspace() and not cut[-1].isspace()
    if inside_a_word and len(cut.split(None, 1)) > 1:
        cut = cut.rsplit(None, 1)[0]
    return cut.rstrip()


def bounded_query(text: str, max_chars: int) -> str:
    """The text recall searches with: `text` stripped, at most `max_chars` characters, cut after a word when the
    cut falls inside one (a single word longer than that is cut where it is)."""
    text = text.strip()
    return text if len(text) <= max_chars else cut_at_word(text, max_chars)


def embedded_query(text: str, max_chars: int | None = None) -> str:
    """What of a query the embedder embeds: its start (at most `max_chars` characters, cut after a word) without
    its closing punctuation. A local model's time is proportional to its tokens (its critical path at round
    start), and a question mark changed nothing measurable (docs/measurements/code.md)."""
    if max_chars is not None:
        text = bounded_query(text, max_chars)
    return text.rstrip(CLOSING_PUNCTUATION + " \t\r\n") or text


# English words whose forms the 'english' stemmer does not bring together ("met" and "meet" stay apart): each
# group's forms, the first its base. A query word of a group brings the group's other forms into full text's
# terms. The commonest verbs (do, go, get, make, take, see, say, know, think, find, tell, ...) are left out: their
# other forms matched so many turns that evidence recall fell (LoCoMo dev split, no embedder: @5 0.812 → 0.787).
_IRREGULAR = (
    "meet met|buy bought|bring brought|teach taught|catch caught|fight fought|seek sought|sell sold|"
    "spend spent|send sent|build built|lend lent|begin began begun|swim swam swum|sing sang sung|"
    "drink drank drunk|win won|write wrote written|ride rode ridden|drive drove driven|eat ate eaten|"
    "fly flew flown|draw drew drawn|grow grew grown|throw threw thrown|choose chose chosen|speak spoke spoken|"
    "break broke broken|wear wore worn|forget forgot forgotten|lose lost|pay paid|sleep slept|feed fed|"
    "hide hid hidden|wake woke woken|child children|mouse mice|foot feet|tooth teeth"
)
IRREGULAR_FORMS = {
    form: tuple(other for other in group.split() if other != form)
    for group in _IRREGULAR.split("|")
    for form in group.split()
}
_WORD = re.compile(r"[A-Za-z]+")


def with_irregular_forms(text: str) -> str:
    """`text` and, after it, the other forms of its irregular English words ("When did they meet?" … "met"): the
    text full text's terms are read from (light stemming where the stemmer leaves forms apart)."""
    forms = dict.fromkeys(other for word in _WORD.findall(text) for other in IRREGULAR_FORMS.get(word.lower(), ()))
    return f"{text} {' '.join(forms)}" if forms else text


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
