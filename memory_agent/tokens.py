"""Token counts: the one estimate memory_agent sizes text and messages with — the context budget of a round, the
summary's hard cap, the recalled block, the parts of a consolidation prompt, and a model call's tokens in the cost
ledger when the provider reports no usage.

It is langchain-core's `count_tokens_approximately` (4 characters a token, plus a few a message): the same for
every model, with no tokenizer to install, so a budget means the same whatever model a deployment uses.
May import nothing of memory_agent.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

CHARS_PER_TOKEN = 4  # count_tokens_approximately's default, for sizing plain text (a line, a cut)


def count_tokens(messages: Sequence[BaseMessage]) -> int:
    """The estimated tokens of `messages` as a model would be sent them."""
    return count_tokens_approximately(messages, chars_per_token=CHARS_PER_TOKEN)
