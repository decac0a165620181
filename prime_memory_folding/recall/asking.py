"""Memories that only ask: a question ranks a little lower, and lends the memory
after it more.

In a conversation, a turn that only asks ("What did you paint last week?")
shares the words of a later question about it, yet holds no answer; the turn
after it does, and shares fewer words. So, where a hybrid text query ranks
(:func:`~prime_memory_folding.recall.fusion.hybrid_rank`), a memory that only asks
(:func:`asks`) in a session keeps ``1 - ask_penalty`` of its fused score, and
the memory stored just after it in the same session takes ``context_weight +
ask_lend`` of the asking memory's fused score as context, where others take
``context_weight`` (:class:`~.ranking.RankingSettings`). A memory stored
without a session is a note, not a turn: nothing answers it, and the rule
leaves it alone. This runs over the best ``ask_pool`` candidates only,
whose contents (and their predecessors') it reads; on the development
splits a one-off check gave the same recall as over every candidate
(benchmarks/README.md). The numbers were chosen on
LoCoMo's and LongMemEval's development splits (``benchmarks/recall_ideas.py``;
docs/recall.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["Asker", "asks"]

#: Whether each record (by id) only asks.
Asker = Callable[[Sequence[str]], list[bool]]

_STATEMENT = re.compile(r"\.(\s|$)")


def asks(text: str) -> bool:
    """Whether ``text`` only asks: its last sentence mark is a question mark, and
    no sentence of it ends with a full stop."""
    text = text.rstrip()
    ends = [text.rfind(mark) for mark in ".!?"]
    return ends[2] >= 0 and ends[2] == max(ends) and _STATEMENT.search(text) is None
