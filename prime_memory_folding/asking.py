"""Memories that only ask: a question ranks a little lower, and lends the memory
after it more.

In a conversation, a turn that only asks ("What did you paint last week?")
shares the words of a later question about it, yet holds no answer; the turn
after it does, and shares fewer words. So, where a hybrid text query ranks
(:func:`~prime_memory_folding.recall.hybrid_rank`), a memory that only asks
(:func:`asks`) keeps ``1 - ASK_PENALTY`` of its fused score, and the memory
stored just after it in the same session takes ``CONTEXT_WEIGHT + ASK_LEND``
of the asking memory's fused score as context, where others take
``CONTEXT_WEIGHT``. This runs over the best :data:`ASK_POOL` candidates only,
whose contents (and their predecessors') it reads; on the development
splits a one-off check gave the same recall as over every candidate
(benchmarks/README.md). The numbers were chosen on
LoCoMo's and LongMemEval's development splits (``benchmarks/recall_ideas.py``;
docs/recall.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["ASK_LEND", "ASK_PENALTY", "ASK_POOL", "Asker", "asks"]

#: The share of its fused score that a memory which only asks gives up (0: off).
ASK_PENALTY = 0.3
#: What the memory after one that only asks takes of its fused score, over the context weight.
ASK_LEND = 0.2
#: The best candidates of a query whose memories are checked for asking.
ASK_POOL = 50

#: Whether each record (by id) only asks.
Asker = Callable[[Sequence[str]], list[bool]]

_STATEMENT = re.compile(r"\.(\s|$)")


def asks(text: str) -> bool:
    """Whether ``text`` only asks: its last sentence mark is a question mark, and
    no sentence of it ends with a full stop."""
    text = text.rstrip()
    ends = [text.rfind(mark) for mark in ".!?"]
    return ends[2] >= 0 and ends[2] == max(ends) and _STATEMENT.search(text) is None
