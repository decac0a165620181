"""Query vectors that weigh each word by how rare it is in the store searched.

A static model (the bundled one) encodes a text as the mean of its tokens'
rows in a table. Its table already weighs words by how common they were in
the text it was distilled on, not in the store at hand: in a store of chat
turns that all start with a speaker's name, that name is common, and a query
that names the speaker leans towards every turn alike. A text query's vector
is therefore the mean of its tokens' rows, each times its word's IDF in the
store, to a power::

    weight = log((N + 1) / (n + 0.5)) ** query_idf

with ``N`` the store's records and ``n`` those that hold the word (the text
index's count, stemmed as the index stems; on SQLite estimated from the
newest records, as a planned text query does). A stop word counts as held by
``stopword_share`` of the store (:class:`~.ranking.RankingSettings`), on
both backends (PostgreSQL's text index keeps no stop words), and a token
outside every word (punctuation) weighs nothing. With every weight equal the
vector is the model's own.

Only the query's vector changes: stored vectors, BM25 and the fusion stay as
they were, so a store ranks the new way at once. Embedders other than a
static model (sentence-transformers, an HTTP service) encode the query as
before. The power and the stop words' share were chosen on the development
splits of LoCoMo and LongMemEval (``benchmarks/recall_ideas.py``; see
docs/recall.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..core.words import STOPWORDS, WORD, SharesOf
from .ranking import DEFAULT_RANKING, RankingSettings

__all__ = [
    "MAX_WEIGHTED_WORDS",
    "SharesOf",
    "WeightedEmbedder",
    "query_words",
    "word_weights",
]

#: A query with more distinct words than this is encoded as the model does (a
#: long text is a document, whose mean the rare words already steer).
MAX_WEIGHTED_WORDS = 64


@runtime_checkable
class WeightedEmbedder(Protocol):
    """An embedder that can weight a text's words (:meth:`.StaticEmbedder.embed_weighted`)."""

    def embed_weighted(self, text: str, weights: Mapping[str, float]) -> npt.NDArray[np.float32]:
        """``text``'s unit vector, each token weighted by its word's weight."""
        ...


def query_words(text: str) -> list[str]:
    """The distinct words of ``text``, in lower case, in order."""
    return list(dict.fromkeys(w.lower() for w in WORD.findall(text)))


def word_weights(
    text: str, shares_of: SharesOf, settings: RankingSettings = DEFAULT_RANKING
) -> dict[str, float] | None:
    """Each word of ``text`` and its weight; None to encode the text as the model does
    (``query_idf`` 0, no word, too many, or a store without text)."""
    words = query_words(text)
    stopword_share = settings.stopword_share
    if not settings.query_idf or not words or len(words) > MAX_WEIGHTED_WORDS:
        return None
    looked_up = [w for w in words if w not in STOPWORDS]
    found = shares_of(looked_up) if looked_up else ([], 1)
    if found is None:
        return None
    shares, total = found
    share = dict(zip(looked_up, shares))
    weights = {}
    for word in words:
        part = share.get(word, stopword_share)
        held = (stopword_share if part is None else min(max(part, 0.0), 1.0)) * total
        weights[word] = math.log((total + 1) / (held + 0.5)) ** settings.query_idf
    return weights
