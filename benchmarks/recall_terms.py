"""Terms for ``recall_ideas.py`` read from the static model's token table and the store.

A model2vec static model encodes a text as the mean of its tokens' rows in a
table, normalised. With the table at hand, a query can be encoded otherwise:

- :meth:`Vocabulary.weighted` weights each of the query's tokens by its IDF in
  the store searched (``log((N + 1) / (holders + 0.5))`` to a power), or drops
  the tokens more than a share of the store holds; every weight 1 gives the
  model's own encoding;
- :meth:`Vocabulary.neighbours` gives a word's nearest whole words in the
  table, for a second BM25 query of the words a store holds
  (:func:`expansion`);
- :func:`context_vectors` mixes each memory's vector with the mean of its
  session neighbours' (the neighbours the context term reads).

It also holds the other ideas' helpers that read a store beyond the fusion: a
second hop and links (:func:`second_hop`), which memories ask (:func:`asks`),
variety (:func:`varied`, :func:`marginal`) and lexical feedback's words
(:func:`lend_words`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from prime_memory_folding.core.words import STOPWORDS, WORD

if TYPE_CHECKING:
    from recall_ideas import Haystack, Idea

Array = npt.NDArray[np.float64]
_STATEMENT = re.compile(r"\.(\s|$)")
_PLAIN_WORD = re.compile(r"[a-z]{3,}")
#: A neighbour that starts with the same letters as the word is the same word to BM25
#: (its porter stem), so it adds nothing.
SAME_PREFIX = 5


class Vocabulary:
    """A model2vec static model's tokenizer and token table."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.table = np.asarray(model.embedding, dtype=np.float32)
        vocab: dict[str, int] = model.tokenizer.get_vocab()
        words = sorted(
            (i, w) for w, i in vocab.items() if _PLAIN_WORD.fullmatch(w) and w not in STOPWORDS
        )
        self.words = [w for _, w in words]
        rows = self.table[[i for i, _ in words]]
        self.word_units = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        self._near: dict[tuple[str, float, int], list[str]] = {}
        self._ids: dict[frozenset[str], frozenset[int]] = {}

    def word_ids(self, words: frozenset[str]) -> frozenset[int]:
        """The token ids of those of ``words`` that are one token of the table."""
        if words not in self._ids:
            table = self.model.tokenizer.get_vocab()
            self._ids[words] = frozenset(table[w] for w in words if w in table)
        return self._ids[words]

    def tokens(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, as the model reads them."""
        return [list(ids) for ids in self.model.tokenize(list(texts))]

    def holders(self, tokens: Sequence[Sequence[int]]) -> npt.NDArray[np.int64]:
        """Per token id: how many of the texts (as ``tokens``) hold it."""
        out = np.zeros(len(self.table), dtype=np.int64)
        for ids in tokens:
            out[np.unique(np.array(ids, dtype=np.int64))] += 1
        return out

    def weighted(self, ids: Sequence[int], weights: Array) -> npt.NDArray[np.float32]:
        """The unit mean of the rows of ``ids``, each times its weight (all 0: zeros)."""
        if not len(ids) or not weights.any():
            return np.zeros(self.table.shape[1], dtype=np.float32)
        mean = (self.table[list(ids)].astype(np.float64) * weights[:, None]).sum(axis=0)
        norm = float(np.linalg.norm(mean))
        return (mean / norm if norm > 0 else mean).astype(np.float32)

    def neighbours(self, word: str, similarity: float, top: int) -> list[str]:
        """Up to ``top`` whole words of the table with cosine at least ``similarity`` to
        ``word`` (one token of the table), other than ``word`` and words of its stem."""
        key = (word, similarity, top)
        if key not in self._near:
            ids = self.tokens([word])[0]
            if len(ids) != 1:  # a word in pieces: its mean is mostly noise
                self._near[key] = []
                return []
            cosine = self.word_units @ self.weighted(ids, np.ones(1))
            found = []
            for i in np.argsort(-cosine, kind="stable")[: top + 20]:
                other = self.words[int(i)]
                if cosine[i] < similarity or len(found) == top:
                    break
                if other[:SAME_PREFIX] != word[:SAME_PREFIX]:
                    found.append(other)
            self._near[key] = found
        return self._near[key]


def unit_rows(vectors: Any) -> Any:
    """``vectors`` (one, or one a row) scaled to length 1 (zeros stay zeros), as float32."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def token_weights(
    ids: Sequence[int], holders: npt.NDArray[np.int64], total: int, power: float, drop: float = 1.0
) -> Array:
    """Per token of a text: its IDF in the store to ``power`` (0: 1), 0 when more than
    ``drop`` of the store's ``total`` texts hold it; all 1 if that drops every one."""
    held = holders[list(ids)].astype(np.float64)
    weights = np.log((total + 1) / (held + 0.5)) ** power if power else np.ones(len(ids))
    kept = np.where(held > drop * total, 0.0, weights)
    return kept if kept.any() else np.ones(len(ids))


#: Words that hedge or frame a question ("Would X likely ...", "What might X's ... be?")
#: rather than name what it asks about.
HEDGES = frozenset(("would", "could", "might", "may", "likely", "probably", "possibly",
                    "considered", "consider", "be", "kind", "type", "sort"))  # fmt: skip


def stripped(vocab: Vocabulary, ids: Sequence[int], which: str) -> Array:
    """Per token of a query: 0 for a stop word ("stop") or a stop word or hedge ("hedge"),
    else 1; all 1 if that leaves none."""
    out = vocab.word_ids(STOPWORDS | (HEDGES if which == "hedge" else frozenset()))
    weights = np.array([0.0 if i in out else 1.0 for i in ids])
    return weights if weights.any() else np.ones(len(ids))


def expansion(
    vocab: Vocabulary, query: str, holders: Counter[str], similarity: float, top: int
) -> str:
    """The table's nearest words to the query's content words that the store holds."""
    words = [w.lower() for w in WORD.findall(query)]
    content = {w for w in words if _PLAIN_WORD.fullmatch(w) and w not in STOPWORDS}
    found: dict[str, None] = {}
    for word in sorted(content):
        for other in vocab.neighbours(word, similarity, top):
            if other in holders and other not in content:
                found[other] = None
    return " ".join(found)


def context_vectors(
    whole: Any, sessions: npt.NDArray[np.int64], reach: int, own: float
) -> npt.NDArray[np.float32]:
    """Each memory's unit vector mixed with its session neighbours' mean: ``own`` of its
    own and the rest the neighbours' (itself, when it has none), normalised. ``sessions``
    holds each memory's session (a code; memories in stored order)."""
    n = len(sessions)
    total = np.zeros(whole.shape, dtype=np.float64)
    count = np.zeros(n)
    for step in [s for w in range(1, reach + 1) for s in (-w, w)]:
        other = np.arange(n) + step
        ok = (other >= 0) & (other < n)
        other = np.clip(other, 0, n - 1)
        ok &= sessions[other] == sessions
        total += np.where(ok[:, None], whole[other], 0.0)
        count += ok
    mean = np.where(count[:, None] > 0, total / np.maximum(count, 1)[:, None], whole)
    return unit_rows(own * whole + (1 - own) * mean)  # type: ignore[no-any-return]


def second_hop(
    h: Haystack, idea: Idea, first: npt.NDArray[np.int64], final: Array
) -> tuple[Array, npt.NDArray[np.bool_]]:
    """Scores lifted by the first hits' likeness (vectors, or rare words shared)."""
    top = final[first[0]] if len(first) else 0.0
    lift = np.zeros(len(h.texts))
    if idea.hop_docs and top > 0:
        hits = first[: idea.hop_docs]
        share = np.maximum(final[hits], 0.0) / top
        likeness = np.maximum(h.whole @ h.whole[hits].T, 0.0) * share
        likeness[hits, np.arange(len(hits))] = 0.0  # a hit does not lift itself
        lift += idea.hop_weight * likeness.max(axis=1)
    if idea.link_docs and top > 0:
        total = len(h.texts)
        rare = {
            w: math.log(total / n)
            for w, n in h.holders.items()
            if 2 <= n <= max(2, idea.link_share * total)
        }
        for hit in first[: idea.link_docs]:
            mine = {
                w
                for w in h.words[hit]
                if w in rare and (not idea.link_names or _written_as_name(h.texts[hit], w))
            }
            if not mine:
                continue
            weight = sum(rare[w] for w in mine)
            share = max(final[hit], 0.0) / top
            for other, counts in enumerate(h.words):
                if other == hit:
                    continue
                common = sum(rare[w] for w in mine if w in counts)
                if common:
                    lift[other] = max(lift[other], idea.link_weight * share * common / weight)
    return final + lift, lift > 0


def asks(text: str, kind: str) -> bool:
    """Whether ``text`` asks, as ``kind`` reads it (see Idea.ask_kind)."""
    ends = [text.rfind(mark) for mark in ".!?"]
    last = max(ends) >= 0 and ends[2] == max(ends)
    if kind == "only":
        return last and _STATEMENT.search(text.split(" [image:")[0]) is None
    if kind == "short":
        return last and len(text.split()) <= 20
    return last


def _written_as_name(text: str, word: str) -> bool:
    return re.search(rf"\b{re.escape(word[:1].upper() + word[1:])}\b", text) is not None


def varied(h: Haystack, final: Array, order: npt.NDArray[np.int64], penalty: float) -> Any:
    """``order`` again, each hit costing the later ones of its session ``penalty``."""
    taken: Counter[int] = Counter()
    left = [int(i) for i in order]
    out = []
    while left:
        best = max(
            left, key=lambda i: (final[i] - penalty * taken[int(h.sessions[i])], -left.index(i))
        )
        out.append(best)
        left.remove(best)
        taken[int(h.sessions[best])] += 1
    return np.array(out, dtype=np.int64)


def session_lead(h: Haystack, lending: Array, vector: Any, kind: str) -> Array:
    """Per memory, its session's score: the best ``lending`` score in it ("max"), the mean
    of its two best ("top2"), or its mean vector's cosine with the query ("cos"), over the
    best session's."""
    _, session = np.unique(h.sessions, return_inverse=True)
    count = int(session.max()) + 1 if len(session) else 0
    if kind == "cos":
        sums = np.zeros((count, h.whole.shape[1]))
        np.add.at(sums, session, h.whole)
        score = np.maximum(unit_rows(sums) @ vector, 0.0)
    elif kind == "top2":
        score = np.zeros(count)
        for s in range(count):
            best = np.sort(lending[session == s])[-2:]
            score[s] = best.mean()
    else:
        score = np.zeros(count)
        np.maximum.at(score, session, lending)
    top = float(score.max()) if len(score) else 0.0
    return score[session] / top if top > 0 else np.zeros(len(session))


def marginal(h: Haystack, final: Array, order: npt.NDArray[np.int64], weight: float) -> Any:
    """``order`` again, each hit costing the later ones ``weight`` x their cosine with it."""
    left = [int(i) for i in order]
    penalty = np.zeros(len(h.texts))
    out = []
    while left:
        best = max(left, key=lambda i: (final[i] - penalty[i], -left.index(i)))
        out.append(best)
        left.remove(best)
        penalty = np.maximum(penalty, weight * np.maximum(h.whole @ h.whole[best], 0.0))
    return np.array(out, dtype=np.int64)


def lend_words(h: Haystack, q: int, first: list[int], docs: int, words: int) -> str:
    """The ``words`` most telling words of the first ``docs`` hits, not in the query."""
    total = len(h.texts)
    asked = {w.lower() for w in WORD.findall(h.query_texts[q])}
    weight: Counter[str] = Counter()
    for hit in first[:docs]:
        for w, tf in h.words[hit].items():
            held = h.holders[w]
            if w in asked or held < 2 or held > 0.1 * total or w.isdigit() or len(w) < 3:
                continue
            weight[w] += tf * math.log(total / held)
    return " ".join(w for w, _ in weight.most_common(words))
