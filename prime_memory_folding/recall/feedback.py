"""Lexical feedback: a text query's first hits lend it their most telling words.

A question and the memory that answers it often share few words. The first
hits of a hybrid query are mostly about the right thing, though, and the
words they share with the answer are often rare in the store. So a hybrid
text query ranks twice:

1. as usual, and its ``lend_docs`` best hits lend their ``lend_words`` most
   telling words (:func:`telling_words`): words the query does not hold, of
   three letters or more, neither numbers nor stop words, held by at least two
   records, by at most ``lend_common`` of the store and by at most
   ``lend_most`` records (:class:`~.ranking.RankingSettings`), each weighing
   ``tf * log(N / n)`` summed over the hits (``n`` the records that hold it,
   as the query weights count it, :mod:`.query_weights`);
2. again, with the lexical side ``(1 - lend_weight) * bm25 / max(bm25) +
   lend_weight * lent / max(lent)``, where ``lent`` is the BM25 of those words
   (a second lexical query, gated like the first); a record only they match
   joins the candidates.

The cosine side is computed once. Hits show the lent words' share as the
score part ``lent``. A text query without a vector side (no embedder, or a
store of the caller's own vectors) ranks once. The numbers were chosen on the
development splits of LoCoMo and LongMemEval (``benchmarks/recall_ideas.py``;
see docs/recall.md).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

from ..core.words import STOPWORDS, WORD
from .query_weights import SharesOf, query_words
from .ranking import DEFAULT_RANKING, RankingSettings

__all__ = ["MAX_LOOKED_UP", "Lender", "telling_words"]

#: The hits' words looked up in the store, at most (the most frequent in them first).
MAX_LOOKED_UP = 256

#: The words a text query's first hits (by record id, best first) lend it.
Lender = Callable[[Sequence[str]], list[str]]


def telling_words(
    texts: Sequence[str],
    query: str,
    shares_of: SharesOf,
    settings: RankingSettings = DEFAULT_RANKING,
) -> list[str]:
    """The ``settings.lend_words`` most telling words of ``texts`` (the first hits,
    best first) for a query of text ``query``, most telling first."""
    asked = set(query_words(query))
    counts = [Counter(w.lower() for w in WORD.findall(text)) for text in texts]
    seen: Counter[str] = Counter()
    for words in counts:
        seen.update(words)
    wanted = [
        w
        for w, _ in seen.most_common()
        if w not in asked and w not in STOPWORDS and len(w) >= 3 and not w.isdigit()
    ][:MAX_LOOKED_UP]
    found = shares_of(wanted) if wanted else None
    if found is None:
        return []
    shares, total = found
    held = {w: share * total for w, share in zip(wanted, shares) if share is not None}
    weight: dict[str, float] = {}
    for words in counts:
        for w, tf in words.items():
            n = held.get(w, 0.0)
            if 2 <= n <= min(settings.lend_common * total, settings.lend_most):
                weight[w] = weight.get(w, 0.0) + tf * math.log(total / n)
    best = sorted(weight.items(), key=lambda kv: -kv[1])  # stable: ties keep their order
    return [w for w, _ in best[: settings.lend_words]]
