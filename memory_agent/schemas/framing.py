"""How stored text is quoted into the model's context: one rule for the conversation memory and the recalled block,
in every injection mode (prefix and system).

Stored text is untrusted: a user's earlier words, a summarizer's or an extractor's output. Quoted, it must not close
its frame (`]` of a prefix frame, `</memory>` or `</long_term_memory>` of a system one), open another, or start a
line that reads as one of the recalled block's own. Characters are compared as the model may read them: a
compatibility form (fullwidth `＜/long_term_memory＞`, `］`) counts as the character it stands for, and invisible
format characters (zero-width spaces and joiners, bidi controls, soft hyphens) are dropped before anything is matched,
so `<\u200b/long_term_memory>` is `</long_term_memory>`. The escaping stays invisible where it can: no backslash
escapes; square brackets become parentheses, and only an angle bracket that opens a tag (`<` before `/` or a
letter) becomes one, so `x < 5` reads as written.
"""

from __future__ import annotations

import re
import unicodedata

# Line breaks Python's splitlines() (and a reader) honours, besides "\n": all become "\n".
_LINE_BREAKS = re.compile(r"\r\n?|[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_ASCII_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f]")
# Angle brackets a model may read as `<` or `>` that no compatibility form maps to them (single guillemets,
# mathematical and ornamental angle brackets, the deprecated technical ones).
_ANGLE_LOOKALIKES = {
    "\u2039": "<",
    "\u203a": ">",
    "\u2329": "<",
    "\u232a": ">",
    "\u27e8": "<",
    "\u27e9": ">",
    "\u276e": "<",
    "\u276f": ">",
    "\u2770": "<",
    "\u2771": ">",
    "\u29fc": "<",
    "\u29fd": ">",
}
# Square brackets' look-alikes beyond their compatibility forms (CJK text's own brackets, 【】 and 〔〕, stay).
_BRACKET_LOOKALIKES = {"\u27e6": "[", "\u27e7": "]", "\u301a": "[", "\u301b": "]", "\u2045": "[", "\u2046": "]"}
# The printable characters _as_read changes (the compatibility forms of brackets and the look-alikes above): with
# `str.isprintable()` (false for every format character and control) they tell, at C speed, whether a text needs
# reading character by character at all. tests/unit/test_framing.py checks them against unicodedata.
_LOOKALIKES = (
    "\ufe47",
    "\ufe48",
    "\ufe64",
    "\ufe65",
    "\uff1c",
    "\uff1e",
    "\uff3b",
    "\uff3d",
    *_ANGLE_LOOKALIKES,
    *_BRACKET_LOOKALIKES,
)
# A tag opening: `<` before optional white space and `/` or a letter (`< /long_term_memory>`, `<memory`).
_TAG_OPEN = re.compile(r"<(?=\s*(?:/|[A-Za-z_]))")
_TAG_END = re.compile(r"(\((?:\s*/)?\s*[A-Za-z_][\w:-]*\s*)>")
# A quoted line's continuation is indented by this much: deeper than every line the block writes itself (a hit at
# column 0, `- [`; its neighbours at column 2, `  (`), so a line break in a turn cannot start a line of the block.
CONTINUATION = "    "


def _as_read(char: str) -> str:
    """What one character reads as: '' for an invisible one, its ASCII bracket for a look-alike, else itself."""
    category = unicodedata.category(char)
    if category == "Cf" or (category == "Cc" and char not in "\n\t"):
        return ""
    if char in _ANGLE_LOOKALIKES:
        return _ANGLE_LOOKALIKES[char]
    if char in _BRACKET_LOOKALIKES:
        return _BRACKET_LOOKALIKES[char]
    folded = unicodedata.normalize("NFKC", char)
    if folded != char and any(c in folded for c in "<>[]"):
        return folded
    return char


class _AsReadTable(dict[int, "int | str | None"]):
    """str.translate's table of _as_read, filled as characters are met (translate then runs at C speed); at most
    _TABLE_SIZE characters are kept, so text made of every code point cannot grow it without bound."""

    def __missing__(self, code: int) -> int | str | None:
        char = chr(code)
        read = _as_read(char)
        value: int | str | None = None if read == "" else code if read == char else read
        if len(self) < _TABLE_SIZE:
            self[code] = value
        return value


_TABLE_SIZE = 65_536
_AS_READ = _AsReadTable()


def neutral_text(text: str) -> str:
    """`text` as it may be quoted inside any frame: line breaks as "\\n", invisible format characters dropped,
    look-alike brackets read as what they stand for, square brackets as parentheses, a tag's `<` as `(` (and its
    `>`); nothing else changes."""
    text = without_tags(text)
    return text.replace("[", "(").replace("]", ")") if "[" in text or "]" in text else text


def without_tags(text: str) -> str:
    """`text` read as the model may read it (line breaks as "\\n", invisible characters dropped, look-alike
    brackets as what they stand for) with no tag left to open or close: the last pass over a whole frame's content,
    which keeps the block's own square brackets (a block stored by an earlier release is made safe by it too)."""
    # Most text is printable (no line break, control or format character) and, when not ASCII, holds no look-alike:
    # str methods say so at C speed, and then nothing is scanned character by character.
    if not text.isprintable():
        text = _ASCII_CONTROLS.sub("", _LINE_BREAKS.sub("\n", text))
    if not text.isascii() and (not text.isprintable() or any(c in text for c in _LOOKALIKES)):
        text = text.translate(_AS_READ)
    if "<" in text:
        text = _TAG_OPEN.sub("(", text)
        # A tag's end is harmless alone, but `(/memory>` still reads as a tag: close it as it was opened.
        text = _TAG_END.sub(r"\1)", text)
    return text


def quoted_line(text: str) -> str:
    """`text` quoted as a line of the recalled block: neutral, each line after its first indented by CONTINUATION."""
    text = neutral_text(text)
    return text.replace("\n", "\n" + CONTINUATION) if "\n" in text else text


def quoted_label(text: str) -> str:
    """A stored value shown inside a line's own brackets (a thread id, an item key): neutral, on one line."""
    return " ".join(neutral_text(text).split())
