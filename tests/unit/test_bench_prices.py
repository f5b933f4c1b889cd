"""How the model-side stage bills a sequence of model calls: OpenAI's automatic cache (1,024 tokens, steps of 128,
the longest prefix shared with the previous request), Anthropic's breakpoints (a hit is an earlier breakpoint's
prefix, the rest up to the last breakpoint written at 1.25x), and the prefix-kept share."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from benchmarks.model_calls import call_of, common_prefix, prefix_kept_share, price_calls
from benchmarks.prices import PRICE_SETS, openai_cached

APP = "rules " * 1500  # about 2,250 tokens
OPENAI, ANTHROPIC = PRICE_SETS


def calls(*conversations):
    return [call_of([SystemMessage(APP), *c], [], 10, app_prompt=APP) for c in conversations]


def test_openai_reads_the_shared_prefix_in_steps_of_128_from_1024():
    assert openai_cached(1023, 5000) == 0 and openai_cached(5000, 1000) == 0
    assert openai_cached(1024, 5000) == 1024 and openai_cached(1151, 5000) == 1024 and openai_cached(1152, 5000) == 1152
    assert common_prefix("abcd", "abcx") == 3 and common_prefix("ab", "abc") == 2 and common_prefix("", "a") == 0


def test_an_extended_input_is_read_from_cache_and_a_changed_one_is_not():
    long = "a long question " * 100  # about 400 tokens: more than a 128-token step
    u1, a1, u2 = HumanMessage(long), AIMessage("answer one"), HumanMessage("question two")
    grown = calls([u1], [u1, a1, u2])
    changed = calls([HumanMessage("[memory A] " + long)], [HumanMessage("[memory B] " + long), a1, u2])
    assert prefix_kept_share(grown) == 1.0
    # Whatever changes after the app prompt, the prompt itself is still served from cache.
    for prices in (OPENAI, ANTHROPIC):
        kept, broken = price_calls(grown, prices, chat=True), price_calls(changed, prices, chat=True)
        assert kept["read_tokens"] > broken["read_tokens"] >= 1024, prices.name
        assert kept["input"] < broken["input"], prices.name
    # Anthropic: nothing is read without a breakpoint (the summarizers mark none); OpenAI reads regardless.
    assert price_calls(grown, ANTHROPIC, chat=False)["read_tokens"] == 0
    assert price_calls(grown, OPENAI, chat=False)["read_tokens"] > 0


def test_the_prefix_kept_ignores_only_the_last_user_message():
    u1, a1 = HumanMessage("question one"), AIMessage("answer one")
    recalled = calls([HumanMessage("[recall X] question one")], [u1, a1, HumanMessage("[recall Y] question two")])
    assert prefix_kept_share(recalled) == 1.0  # the block rode on the question, which the next round no longer has
    u2, a2, u3 = HumanMessage("question two"), AIMessage("answer two"), HumanMessage("question three")
    moved = calls(
        [HumanMessage("[recall X] question one"), a1, u2], [HumanMessage("[recall Y] question one"), a1, u2, a2, u3]
    )
    assert prefix_kept_share(moved) == 0.0  # a block on the first user message breaks it
