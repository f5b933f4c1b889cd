"""Offline extraction of structured items: what the demo and the tests rely on without a model."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memory_agent.llm.extract import RULES, Statement, extract_items, folded
from memory_agent.schemas.items import (
    StructuredItems,
    SummaryItem,
    is_single_valued,
    normalize_content,
    normalize_key,
)


def said(*texts: str, role: str = "user") -> list[Statement]:
    return [Statement(sequence=2 * i, role=role, text=text) for i, text in enumerate(texts)]


def keyed(items: StructuredItems) -> dict[tuple[str, str, str], list[int]]:
    return {(t, i.key, i.content): i.source_sequences for t, i in items.typed()}


def test_plain_statements_become_typed_items():
    items = extract_items(
        said(
            "Hi, my name is Ana and I'm allergic to peanuts.",
            "I prefer dark mode, please.",
            "I moved to Lisbon last spring.",
            "Remind me to call the dentist.",
            "We decided to use Postgres for the shop.",
            "My sister is Marta.",
            "I work at Acme Robotics now",
        )
    )
    assert keyed(items) == {
        ("fact", "name", "The user's name is Ana"): [0],
        ("fact", "allergies", "The user is allergic to peanuts"): [0],
        ("preference", "ui_theme", "The user prefers the dark theme"): [2],
        ("fact", "home_city", "The user lives in Lisbon"): [4],
        ("todo", "todo_call_the_dentist", "Remind the user to call the dentist"): [6],
        ("decision", "decisions", "Decided: use Postgres for the shop"): [8],
        ("entity", "sister", "The user's sister is Marta"): [10],
        ("fact", "employer", "The user works at Acme Robotics"): [12],
    }
    by_key = {i.key: (t, i) for t, i in items.typed()}
    assert by_key["allergies"][1].importance > 0.9
    assert [is_single_valued(*by_key[k]) for k in ("home_city", "allergies", "ui_theme")] == [True, False, True]


def test_assistant_messages_are_not_sources():
    assert extract_items(said("You said your name is Bob.", "I prefer tea", role="assistant")).is_empty()


def test_a_later_value_of_the_same_key_wins_and_repeats_accumulate_sources():
    items = extract_items(
        said(
            "I prefer dark mode",
            "I live in Porto",
            "I prefer light mode",
            "I live in Porto",
            "I'm allergic to peanuts",
            "I am allergic to shellfish",
        )
    )
    assert keyed(items) == {
        ("preference", "ui_theme", "The user prefers the light theme"): [4],
        ("fact", "home_city", "The user lives in Porto"): [2, 6],
        ("fact", "allergies", "The user is allergic to peanuts"): [8],  # many values: both stay
        ("fact", "allergies", "The user is allergic to shellfish"): [10],
    }


def test_keys_and_content_normalize_across_scripts():
    assert normalize_key("  Home City! ") == "home_city"
    assert normalize_key("上海 住所") == "上海_住所"
    assert normalize_content("Lives in  LISBON.") == normalize_content("lives in lisbon")


def test_untrusted_items_are_validated():
    with pytest.raises(ValidationError):
        SummaryItem(key="!!!", content="x")
    with pytest.raises(ValidationError):
        SummaryItem(key="k", content="x", importance=1.5)
    with pytest.raises(ValidationError):
        SummaryItem(key="k", content="x", source_sequences=[-1])
    item = SummaryItem(key="K", content="a\x00b  c", source_sequences=[3, 1, 3])
    assert (item.key, item.content, item.source_sequences) == ("k", "ab c", [1, 3])


def test_sources_outside_the_window_are_dropped():
    items = StructuredItems(
        facts=[
            SummaryItem(key="a", content="inside", source_sequences=[4, 40]),
            SummaryItem(key="b", content="outside", source_sequences=[40]),
            SummaryItem(key="c", content="uncited"),
        ]
    )
    assert keyed(items.within(0, 10)) == {("fact", "a", "inside"): [4], ("fact", "c", "uncited"): []}


def test_someone_elses_allergy_is_kept_with_their_name():
    items = extract_items(said("We love seafood, but Joao is allergic to shellfish."))
    assert keyed(items) == {("fact", "allergies", "Joao is allergic to shellfish"): [0]}


# One statement each rule matches, at least.
RULE_SAMPLES = (
    "Hi, my name is Ana and I'm allergic to peanuts.",
    "Call me called Bea, I am very allergic to dust",
    "Joao is severely allergic to shellfish",
    "I recently relocated to Rio de Janeiro",
    "I just moved to Lisbon",
    "I live in New York and I work for Acme Robotics.",
    "I'm a vegetarian. I prefer dark mode, I like tea, I love jazz",
    "We agreed on Postgres. I chose to stay. We decided to ship; let's go with plan B",
    "Remind me to call mom. Done: call mom. Mark the report as done.",
    "My sister's name is Marta and my boss is Rui.",
)


def _spellings(text: str) -> list[str]:
    """`text` as typed, in capitals, title case, and with the characters a case-insensitive search equates with
    ASCII letters (dotless and dotted capital i, long s, the Kelvin sign)."""
    return [
        text,
        text.upper(),
        text.title(),
        text.replace("i", "\u0131"),
        text.replace("i", "\u0130").replace("I", "\u0130"),
        text.replace("s", "\u017f"),
        text.replace("k", "\u212a"),
    ]


def test_a_rule_that_matches_a_statement_finds_its_needles_in_it():
    """The needles only spare searches that cannot match: wherever a rule's pattern matches, in any spelling, the
    rule's needles are in the statement's folded text, so skipping on them never loses an item."""
    for rule in RULES:
        matched = [text for sample in RULE_SAMPLES for text in _spellings(sample) if rule.pattern.search(text)]
        assert len(matched) >= 3, f"no samples for the rule of {rule.key!r}"
        missed = [text for text in matched if not rule.may_match(folded(text))]
        assert not missed, f"{rule.key!r}: needles {rule.needles} not found in {missed}"
    assert not RULES[0].may_match(folded("Round 3 question: order invoice shipping refund?"))
