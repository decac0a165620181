"""Screen ideas for text recall on LongMemEval and LoCoMo without changing the engine.

Trying an idea in the engine means a schema change (several vectors per
memory), a new bundled model, or new fusion code. This script tries them
first on a re-implementation of the engine's text ranking in numpy: the same
BM25 scores (read from the engine with embedding off), the same stored
vectors, the same fusion

    fused = (1 - cosine_weight) * bm25 / max(bm25) + cosine_weight * max(cosine, 0)
    final = fused + context_weight * (best fused score of a neighbour in its session)

(neighbours: the ``reach`` memories stored before it and after it in the same
session, as the benchmarks store them: a LongMemEval haystack session, a
LoCoMo dialogue session) over the same candidates (every lexical hit and the
3 x limit best by cosine). Before any idea it checks that this
re-implementation, at the engine's own weights, gives the engine's own recall
on both benchmarks (``longmemeval_recall.py`` and ``locomo_recall.py``, the
default hybrid ranking with the parts these screens led to turned off in its
settings, ``_shared.later_parts_off()``: the query weights, questions,
lexical feedback and context candidates); if it does not, it exits with
status 1.

Ideas, each scored on LongMemEval (turn recall_all@10, session recall_all@5)
and LoCoMo (R@10):

- several vectors per memory: one per sentence, scored by the best sentence
  or by a mix of the whole text's cosine and the best sentence's;
- BM25 per sentence (best sentence, or a mix with the whole text's);
- BM25 length normalisation pushed up or down (``bm25 * (length / mean)^p``);
- other fusions: cosine over its maximum, reciprocal rank fusion, a wider or
  weaker neighbour context, pseudo-relevance feedback on the query vector;
- other static models, given as ``--model model2vec:<folder>``;
- the fusion weights with and without sentence vectors, tuned leave-one-out
  (per question on LongMemEval, per conversation on LoCoMo).

Run from the repository root::

    python3 benchmarks/recall_ideas.py [--model model2vec:/path ...] [--json OUT]

``--weak`` scores only the ideas for LoCoMo's weak categories (``WEAK_IDEAS``,
from the families in ``recall_families.py``: feedback, a second hop, links,
speaker labels, questions, variety; query and memory vectors weighted by IDF in
the store or less its mean vector, the model's word neighbours as a second BM25
query, vectors mixed with their neighbours', a wider pool by cosine; and
combinations) on top of the engine's ranking, per category, in sample and tuned
leave-one-conversation-out, with LongMemEval's headline metrics beside them;
``--only PART`` keeps the families whose names hold PART. The terms read from
the static model's token table are in ``recall_terms.py``; the script checks
that the table, every token weighing 1, gives the embedder's query vectors. The
re-implementation includes the time prior, each query's span read at the time
it is asked (LoCoMo: its conversation's last session).

``--tiny`` runs on LongMemEval's generated questions alone (and, with
``--weak``, the LoCoMo file given), for smoke tests.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import _harness as harness
import locomo_recall as locomo
import longmemeval_recall as lme
import numpy as np
import numpy.typing as npt
import recall_families
import recall_terms as terms
from _shared import later_parts_off

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.core.when import time_window
from prime_memory_folding.core.words import WORD
from prime_memory_folding.recall.embeddings import Embedder, load_embedder
from prime_memory_folding.recall.priors import time_closeness

Array = npt.NDArray[np.float64]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
#: A sentence this short joins the one before it.
MIN_SENTENCE_WORDS = 4
#: Allowed gap between this re-implementation's baseline and the engine's, in points.
TOLERANCE = 0.5
#: The engine's ranking this re-implementation reproduces (:class:`Idea`'s defaults).
DEFAULTS: RankingSettings = later_parts_off()


def sentences(text: str) -> list[str]:
    """``text`` cut after ``.``, ``!`` or ``?`` and at line breaks; short pieces rejoin."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if out and len(piece.split()) < MIN_SENTENCE_WORDS:
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out or [text]


def bm25(texts: Sequence[str], queries: Sequence[str]) -> list[Array]:
    """The engine's BM25 score of every text for every query (0 where it does not match)."""
    out = []
    with MemoryEngine(":memory:", embedder="none") as engine:
        records = engine.store_many([{"content": t} for t in texts])
        positions: dict[str, list[int]] = {}
        for i, rec in enumerate(records):  # equal texts share one record, as in the engine
            positions.setdefault(rec.record_id, []).append(i)
        for query in queries:
            scores = np.zeros(len(texts))
            for hit in engine.query(text=query, limit=10_000):
                scores[positions[hit.record.record_id]] = hit.score_parts["bm25"]
            out.append(scores)
    return out


@dataclass
class Haystack:
    """One store's texts, times and vectors, and its queries' scores."""

    texts: list[str]
    stamps: Array
    #: Per text: its session, as a code (texts are in stored order, a session's together).
    sessions: npt.NDArray[np.int64]
    whole: Any
    queries: Any
    bm25: list[Array]
    query_texts: list[str]
    owner: Any = None  # sentence -> text
    sentence_vectors: Any = None
    sentence_bm25: list[Array] = field(default_factory=list)
    #: Per query: the span of time it names, read at the time it is asked.
    windows: list[tuple[float, float] | None] = field(default_factory=list)
    #: Per feedback setting (see lent_key), per query: BM25 of the words its first hits
    #: lent it.
    lent_bm25: dict[Any, list[Array]] = field(default_factory=dict)
    #: Per text: its tag (LoCoMo: the speaker), when the store has tags.
    labels: list[str] = field(default_factory=list)
    #: Per kind of asking (see Idea.ask_kind), per text: whether it asks.
    asks: dict[str, Any] = field(default_factory=dict)
    #: Per text: its words (lower case) and how many texts hold each word.
    words: list[Counter[str]] = field(default_factory=list)
    holders: Counter[str] = field(default_factory=Counter)
    #: The static model's table (None for other embedders), each query's and text's
    #: tokens in it, and per token how many texts hold it.
    vocab: terms.Vocabulary | None = None
    query_ids: list[list[int]] = field(default_factory=list)
    text_ids: list[list[int]] = field(default_factory=list)
    token_holders: Any = None
    #: Per expansion setting, per query: BM25 of the table's neighbours of its words.
    near_bm25: dict[tuple[float, int], list[Array]] = field(default_factory=dict)
    #: Query vectors weighted per store, and context vectors, per setting.
    made: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        embedder: Embedder,
        texts: list[str],
        stamps: list[float],
        sessions: Sequence[Any],
        queries: list[str],
        asked: float,
        vocab: terms.Vocabulary | None = None,
    ) -> Haystack:
        cut = [sentences(t) for t in texts]
        flat = [s for parts in cut for s in parts]
        named = [time_window(text, asked) for text in queries]
        words = [Counter(w.lower() for w in WORD.findall(t)) for t in texts]
        return cls(
            texts=texts,
            stamps=np.array(stamps, dtype=np.float64),
            sessions=np.unique(np.array([str(s) for s in sessions]), return_inverse=True)[1]
            .astype(np.int64)
            .reshape(-1),
            whole=embedder.embed(texts),
            queries=embedder.embed(queries),
            bm25=bm25(texts, queries),
            query_texts=queries,
            owner=np.repeat(np.arange(len(texts)), [len(parts) for parts in cut]),
            sentence_vectors=embedder.embed(flat),
            sentence_bm25=bm25(flat, queries),
            windows=[None if w is None else (w.start, w.end) for w in named],
            asks={
                kind: np.array([terms.asks(t, kind) for t in texts], dtype=bool)
                for kind in ("last", "only", "short")
            },
            words=words,
            holders=Counter(w for counts in words for w in counts),
            vocab=vocab,
            query_ids=vocab.tokens(queries) if vocab else [],
            text_ids=vocab.tokens(texts) if vocab else [],
        )

    def __post_init__(self) -> None:
        if self.vocab is not None:
            self.token_holders = self.vocab.holders(self.text_ids)

    def query_vector(self, q: int, power: float, drop: float, strip: str = "") -> Any:
        """Query ``q`` encoded with its tokens weighted by their IDF here (terms.token_weights),
        and without its stop words (and hedges) with ``strip`` (terms.stripped)."""
        key = ("query", q, power, drop, strip)
        if key not in self.made:
            assert self.vocab is not None, "weighted queries need a model2vec model"
            ids = self.query_ids[q]
            weights = terms.token_weights(ids, self.token_holders, len(self.texts), power, drop)
            if strip:
                weights = weights * terms.stripped(self.vocab, ids, strip)
            self.made[key] = self.vocab.weighted(ids, weights)
        return self.made[key]

    def memory_vectors(self, power: float, centre: float) -> tuple[Any, Any]:
        """The memories' vectors with their tokens weighted by IDF here to ``power``, less
        ``centre`` x their mean (normalised), and that share of the mean."""
        key = ("memories", power, centre)
        if key not in self.made:
            vectors = self.whole
            if power:
                assert self.vocab is not None, "weighted memories need a model2vec model"
                vectors = np.zeros_like(self.whole)
                for i, ids in enumerate(self.text_ids):
                    weights = terms.token_weights(ids, self.token_holders, len(self.texts), power)
                    vectors[i] = self.vocab.weighted(ids, weights)
            mean = centre * vectors.mean(axis=0)
            self.made[key] = (terms.unit_rows(vectors - mean), mean)
        return self.made[key]  # type: ignore[no-any-return]

    def context_vectors(self, reach: int, own: float) -> Any:
        key = ("context", reach, own)
        if key not in self.made:
            self.made[key] = terms.context_vectors(self.whole, self.sessions, reach, own)
        return self.made[key]

    def best_per_text(self, values: Array, floor: float) -> Array:
        best = np.full(len(self.texts), floor)
        np.maximum.at(best, self.owner, values)
        return best


@dataclass(frozen=True)
class Idea:
    """One way to rank; the defaults are the engine's, with the parts the screens led to
    off (``_shared.later_parts_off()``)."""

    cosine_weight: float = DEFAULTS.cosine_weight
    context_weight: float = DEFAULTS.context_weight
    whole_share: float = 1.0  # cosine: this share of the whole text's, the rest best sentence's
    lexical_whole_share: float = 1.0  # BM25 likewise
    length_power: float = 0.0
    cosine_over_max: bool = False
    rrf: int = 0  # reciprocal rank fusion constant; 0: score fusion
    window: int = DEFAULTS.context_reach  # neighbours on each side that lend context
    feedback: int = 0  # pseudo-relevance feedback: the best this many lend the query their vector
    feedback_weight: float = 0.6
    time_weight: float = DEFAULTS.time_weight
    time_tail: float = DEFAULTS.time_tail
    # Lexical feedback: the best ``lend_docs`` hits lend their ``lend_words`` most telling
    # words, whose BM25 (over its maximum) counts ``lend_weight`` of the lexical side.
    lend_docs: int = 0
    lend_words: int = 10
    lend_weight: float = 0.3
    lend_plain: bool = False  # the first hits by the engine's ranking, not by this idea's
    # A second hop: every memory gains ``hop_weight`` x its best cosine with one of the
    # first ``hop_docs`` hits (times that hit's score over the best's).
    hop_docs: int = 0
    hop_weight: float = 0.3
    hop_widens: bool = True  # whether the memories a hop lifts become candidates too
    # Linked memories: every memory gains ``link_weight`` x the IDF-weighted share of
    # rare words (held by at most ``link_share`` of the texts) it has in common with one of
    # the first ``link_docs`` hits; ``link_names``: only words written with a capital.
    link_docs: int = 0
    link_weight: float = 0.3
    link_share: float = 0.02
    link_names: bool = False
    # Sessions: a memory gains this x its session's score (see recall_terms.session_lead).
    session_weight: float = 0.0
    session_kind: str = "max"
    # Variety: each hit already taken from a memory's session costs it this much.
    session_penalty: float = 0.0
    # Labels named: a memory gains this when the query names one of its tags (LoCoMo:
    # the turn's speaker).
    label_weight: float = 0.0
    # Maximal marginal relevance: each hit costs the others this much x its cosine with them.
    mmr: float = 0.0
    # Questions: a memory whose last sentence asks loses this share of its fused score...
    ask_penalty: float = 0.0
    # ...and lends the memory after it this much more context (the answer follows).
    ask_lend: float = 0.0
    # Which memories ask: "last" (the last sentence asks), "only" (and no sentence
    # ends with a full stop), "short" (and at most 20 words).
    ask_kind: str = "last"
    # The query vector from its tokens weighted by their IDF in the store to this power
    # (0: the model's own mean), without the tokens more than ``query_drop`` of it holds.
    query_idf: float = 0.0
    query_drop: float = 1.0
    # ...and without its stop words ("stop") or its stop words and hedges ("hedge").
    query_strip: str = ""
    # The memories' vectors likewise (their tokens weighted by IDF to this power), and this
    # share of the store's mean vector taken from them and from the query's.
    memory_idf: float = 0.0
    centre: float = 0.0
    # Neighbours in the model's table: each content word of the query lends its ``near_top``
    # nearest words (cosine at least ``near_similarity``; 0: off) the store holds, whose
    # BM25 (over its maximum) counts ``near_weight`` of the lexical side.
    near_similarity: float = 0.0
    near_top: int = 3
    near_weight: float = 0.2
    # Vector context: a memory gains this x the cosine of its vector mixed with its
    # neighbours' mean (``context_own`` of its own), and the best by it join the candidates.
    context_vector: float = 0.0
    context_own: float = 0.5
    # The candidates by cosine: this x limit when there is context (the engine's 3).
    pool: int = 3


def _normalised(values: Array) -> Array:
    top = float(values.max()) if len(values) else 0.0
    return values / top if top > 0 else values


def rank(h: Haystack, q: int, idea: Idea, limit: int, query: Any = None) -> list[int]:
    """Indices of ``h.texts`` best first, at most ``limit``, as the engine would rank them."""
    n = len(h.texts)
    vector = h.queries[q] if query is None else query
    if query is None and (idea.query_idf or idea.query_drop < 1.0 or idea.query_strip):
        vector = h.query_vector(q, idea.query_idf, idea.query_drop, idea.query_strip)
    whole = h.whole
    if idea.memory_idf or idea.centre:
        whole, mean = h.memory_vectors(idea.memory_idf, idea.centre)
        vector = terms.unit_rows(vector - mean)
    cosine = (whole @ vector).astype(np.float64)
    if idea.whole_share < 1.0:
        best = h.best_per_text((h.sentence_vectors @ vector).astype(np.float64), -1.0)
        cosine = idea.whole_share * cosine + (1 - idea.whole_share) * best
    cosine = np.maximum(cosine, 0.0)
    raw = h.bm25[q]
    if idea.length_power:
        words = np.array([max(len(t.split()), 1) for t in h.texts], dtype=np.float64)
        raw = raw * (words / words.mean()) ** idea.length_power
    lexical = _normalised(raw)
    if idea.lexical_whole_share < 1.0:
        best = _normalised(h.best_per_text(h.sentence_bm25[q], 0.0))
        lexical = idea.lexical_whole_share * lexical + (1 - idea.lexical_whole_share) * best
    if idea.cosine_over_max:
        cosine = _normalised(cosine)
    if idea.rrf:
        by_cosine = np.empty(n)
        by_cosine[np.argsort(-cosine, kind="stable")] = np.arange(n)
        by_lexical = np.empty(n)
        by_lexical[np.argsort(-lexical, kind="stable")] = np.arange(n)
        lexical = np.where(lexical > 0, idea.rrf / (idea.rrf + by_lexical), 0.0)
        cosine = idea.rrf / (idea.rrf + by_cosine)
    if idea.lend_docs and query is None:
        lent = _normalised(h.lent_bm25[lent_key(idea)][q])
        lexical = (1 - idea.lend_weight) * lexical + idea.lend_weight * lent
        raw = np.where((raw > 0) | (lent > 0), np.maximum(raw, 1e-9), 0.0)
    if idea.near_similarity:
        near = _normalised(h.near_bm25[(idea.near_similarity, idea.near_top)][q])
        lexical = (1 - idea.near_weight) * lexical + idea.near_weight * near
        raw = np.where((raw > 0) | (near > 0), np.maximum(raw, 1e-9), 0.0)
    fused = (1 - idea.cosine_weight) * lexical + idea.cosine_weight * cosine
    # The engine's candidates: every lexical hit and the best by cosine.
    candidate = raw > 0
    spare = min(limit * (idea.pool if idea.context_weight else 1), n)
    candidate[np.argsort(-cosine, kind="stable")[:spare]] = True
    if idea.context_vector:
        mixed = np.maximum(h.context_vectors(idea.window, idea.context_own) @ vector, 0.0)
        fused = fused + idea.context_vector * mixed
        candidate[np.argsort(-mixed, kind="stable")[:spare]] = True
    lending = fused
    if idea.ask_penalty:
        fused = fused * np.where(h.asks[idea.ask_kind], 1 - idea.ask_penalty, 1.0)
    context = np.zeros(n)
    for step in [s for w in range(1, idea.window + 1) for s in (-w, w)]:
        other = np.arange(n) + step
        ok = (other >= 0) & (other < n)
        other = np.clip(other, 0, n - 1)
        ok &= h.sessions[other] == h.sessions
        lent = idea.context_weight * lending[other]
        if step == -1 and idea.ask_lend:
            asks = h.asks[idea.ask_kind][other]
            lent = lent + np.where(asks, idea.ask_lend * lending[other], 0.0)
        context = np.maximum(context, np.where(ok, lent, 0.0))
    matched = fused + context
    final = matched.copy()
    if idea.session_weight:
        final += idea.session_weight * terms.session_lead(h, lending, vector, idea.session_kind)
    window = h.windows[q] if h.windows else None
    if window is not None and idea.time_weight:
        final += idea.time_weight * time_closeness(h.stamps, window, idea.time_tail)
    if idea.label_weight and h.labels:
        asked = {w.lower() for w in WORD.findall(h.query_texts[q])}
        final += idea.label_weight * np.array([label in asked for label in h.labels])
    if query is None and (idea.hop_docs or idea.link_docs):
        first = np.argsort(-np.where(candidate, final, -np.inf), kind="stable")
        final, extra = terms.second_hop(h, idea, first, final)
        if not idea.hop_widens:
            extra &= candidate
        candidate |= extra
        matched = np.where(extra, np.maximum(matched, 1e-9), matched)
    final = np.where(candidate, final, -np.inf)
    order = np.argsort(-final, kind="stable")[:limit]
    order = order[np.isfinite(final[order]) & ((matched[order] > 0) | (raw[order] > 0))]
    if idea.session_penalty:
        order = terms.varied(h, final, order, idea.session_penalty)
    if idea.mmr:
        order = terms.marginal(h, final, order, idea.mmr)
    if idea.feedback and query is None:
        lent = h.whole[order[: idea.feedback]].mean(axis=0)
        moved = h.queries[q] + idea.feedback_weight * lent
        moved = moved / max(float(np.linalg.norm(moved)), 1e-12)
        return rank(h, q, idea, limit, moved)
    return [int(i) for i in order]


def lent_key(idea: Idea) -> Idea:
    """What the words lexical feedback lends depend on: the first hits (by ``idea``
    without feedback, or by the engine's ranking), how many lend and how many words;
    not the feedback's weight."""
    if idea.lend_plain:
        return Idea(lend_docs=idea.lend_docs, lend_words=idea.lend_words, lend_plain=True)
    return replace(idea, lend_weight=0.0)


def second_bm25(h: Haystack, queries: list[str]) -> list[Array]:
    """BM25 over ``h.texts`` of each of ``queries`` (0 everywhere for an empty one)."""
    asked = [text for text in queries if text]
    found = iter(bm25(h.texts, asked) if asked else [])
    return [next(found) if text else np.zeros(len(h.texts)) for text in queries]


@dataclass
class Bench:
    lme: list[tuple[lme.Question, Haystack, list[lme.Key]]]
    locomo: list[tuple[locomo.Conversation, Haystack]]
    scored: dict[Idea, list[Array]] = field(default_factory=dict)

    def lme_scores(self, idea: Idea) -> Array:
        """Per question: turn recall_all@10, session recall_all@5."""
        rows = []
        for question, h, keys in self.lme:
            scores = lme.score(question, [keys[i] for i in rank(h, 0, idea, lme.DEPTH)])
            rows.append((scores["turn all@10"], scores["session all@5"]))
        return np.array(rows, dtype=np.float64).reshape(-1, 2)

    def locomo_scores(self, idea: Idea) -> list[Array]:
        """Per conversation, per question: R@10 (turns are the memories, one dialog id each)."""
        if idea in self.scored:
            return self.scored[idea]
        out = []
        for conv, h in self.locomo:
            dia = [d for d, _, _ in conv.turns]
            row = []
            for q, question in enumerate(conv.questions):
                top = {dia[i] for i in rank(h, q, idea, max(locomo.KS))[:10]}
                row.append(len(question.gold & top) / len(question.gold))
            out.append(np.array(row))
        self.scored[idea] = out
        return out

    def prepare(self, idea: Idea) -> None:
        """The second BM25 query of lexical feedback and of the table's neighbours, for
        every query (once per setting)."""
        stores = [(h, lme.DEPTH) for _, h, _ in self.lme] + [
            (h, max(locomo.KS)) for _, h in self.locomo
        ]
        near = (idea.near_similarity, idea.near_top)
        for h, _ in stores if idea.near_similarity else []:
            if near not in h.near_bm25:
                assert h.vocab is not None, "the table's neighbours need a model2vec model"
                found = [terms.expansion(h.vocab, t, h.holders, *near) for t in h.query_texts]
                h.near_bm25[near] = second_bm25(h, found)
        if not idea.lend_docs:
            return
        key = lent_key(idea)
        first_idea = Idea() if idea.lend_plain else replace(idea, lend_docs=0)
        for h, depth in stores:
            if key in h.lent_bm25:
                continue
            lent = [
                terms.lend_words(
                    h, q, rank(h, q, first_idea, depth), idea.lend_docs, idea.lend_words
                )
                for q in range(len(h.query_texts))
            ]
            h.lent_bm25[key] = second_bm25(h, lent)

    def locomo_by_category(self, idea: Idea) -> dict[str, float]:
        """LoCoMo R@10 overall and per category, in percent."""
        self.prepare(idea)
        scores = self.locomo_scores(idea)
        return by_category(self, scores)

    def measure(self, idea: Idea) -> dict[str, float]:
        self.prepare(idea)
        lme_rows = self.lme_scores(idea)
        result = {
            "lme turn all@10": float(100 * lme_rows[:, 0].mean()) if len(lme_rows) else 0.0,
            "lme session all@5": float(100 * lme_rows[:, 1].mean()) if len(lme_rows) else 0.0,
        }
        if self.locomo:
            flat = np.concatenate(self.locomo_scores(idea))
            result["locomo R@10"] = float(100 * flat.mean())
        return result


def load(embedder: Embedder, lme_items: list[dict[str, Any]], locomo_path: Path | None) -> Bench:
    model = getattr(embedder, "_model", None)  # a model2vec static model's
    vocab = terms.Vocabulary(model) if model is not None else None
    bench = Bench([], [])
    for question in lme.parse(lme_items):
        turns = [(s, i, t) for s in question.sessions for i, t in s.turns if t.strip()]
        texts = [t for _, _, t in turns]
        stamps = [s.when for s, _, _ in turns]
        sessions = [s.session_id for s, _, _ in turns]
        h = Haystack.build(embedder, texts, stamps, sessions, [question.text], question.when, vocab)
        bench.lme.append((question, h, [(s.session_id, i) for s, i, _ in turns]))
    if locomo_path is not None:
        for conv in locomo.load(locomo_path):
            texts = [t for _, t, _ in conv.turns]
            stamps = [w for _, _, w in conv.turns]
            numbers: Sequence[float] = conv.session_of or stamps
            queries = [q.text for q in conv.questions]
            asked = conv.turns[-1][2]  # at the time of the last session
            h = Haystack.build(embedder, texts, stamps, numbers, queries, asked, vocab)
            h.labels = [t.split(":", 1)[0].lower() for t in texts]
            bench.locomo.append((conv, h))
    return bench


def table_gaps(bench: Bench) -> list[str]:
    """Whether the model's table, every token weighing 1, gives the query vectors the
    embedder gave (what the weighted queries change)."""
    stores = [h for _, h, _ in bench.lme] + [h for _, h in bench.locomo]
    worst = 0.0
    for h in stores:
        for q, ids in enumerate(h.query_ids if h.vocab else []):
            mine = h.vocab.weighted(ids, np.ones(len(ids))) if h.vocab else h.queries[q]
            worst = max(worst, float(np.abs(mine - h.queries[q]).max()))
    return [f"query vectors from the table: {worst:.2g} away"] if worst > 1e-5 else []


def by_category(bench: Bench, scores: list[Array]) -> dict[str, float]:
    """Per-question LoCoMo R@10 (one array per conversation) as percent per category."""
    flat = np.concatenate(scores)
    kinds = np.array([q.category for conv, _ in bench.locomo for q in conv.questions])
    out = {"overall": float(100 * flat.mean())}
    for category, name in locomo.CATEGORIES.items():
        if (kinds == category).any():
            out[name] = float(100 * flat[kinds == category].mean())
    return out


def held_out(bench: Bench, family: Sequence[Idea]) -> dict[str, float]:
    """LoCoMo R@10 per category, each conversation scored with the idea of ``family``
    that did best (overall R@10) on the other conversations."""
    per_idea = []
    for idea in family:
        bench.prepare(idea)
        per_idea.append(bench.locomo_scores(idea))
    chosen = []
    for j in range(len(bench.locomo)):

        def train(n: int, skip: int = j) -> float:
            return float(np.concatenate([x for k, x in enumerate(per_idea[n]) if k != skip]).mean())

        chosen.append(per_idea[max(range(len(family)), key=train)][j])
    return by_category(bench, chosen)


def engine_baseline(lme_items: list[dict[str, Any]], locomo_path: Path | None) -> dict[str, float]:
    """The engine's own hybrid on the same data, through the benchmark scripts, as it
    ranked before the parts these screens led to (the query weights, questions,
    lexical feedback and context candidates): the ranking the re-implementation
    reproduces, and the ideas are tried on."""
    questions = lme.parse(lme_items)
    rows = lme.run_system(questions, "builtin", lme.by_text, DEFAULTS)
    result = {
        "lme turn all@10": 100 * sum(r["turn all@10"] for r in rows) / len(rows),
        "lme session all@5": 100 * sum(r["session all@5"] for r in rows) / len(rows),
    }
    if locomo_path is not None:
        convs = locomo.load(locomo_path)
        found, _ = locomo.run_system(convs, "builtin", locomo.by_text, ranking=DEFAULTS)
        result["locomo R@10"] = 100 * sum(r[10] for _, r in found) / len(found)
    return result


#: The fusion before these ideas: cosine 0.6, context 0.6 from one neighbour each side.
BEFORE: dict[str, Any] = {
    "cosine_weight": 0.6,
    "context_weight": 0.6,
    "window": 1,
    "time_weight": 0.0,
}


def before(**changes: Any) -> Idea:
    """An idea on top of the fusion as it was before any of them."""
    return Idea(**{**BEFORE, **changes})


IDEAS: dict[str, Idea] = {
    "fusion before (cosine 0.6, context 0.6, reach 1)": before(),
    "embedder alone": before(cosine_weight=1.0, context_weight=0.0),
    "sentence vectors: best sentence": before(whole_share=0.0),
    "sentence vectors: 0.7 whole + 0.3 best": before(whole_share=0.7),
    "sentence vectors: 0.5 whole + 0.5 best": before(whole_share=0.5),
    "sentence vectors, embedder alone: 0.5 + 0.5": before(
        whole_share=0.5, cosine_weight=1.0, context_weight=0.0
    ),
    "sentence BM25: best sentence": before(lexical_whole_share=0.0),
    "sentence BM25: 0.5 whole + 0.5 best": before(lexical_whole_share=0.5),
    "BM25 x (length / mean)^-0.3": before(length_power=-0.3),
    "BM25 x (length / mean)^0.3": before(length_power=0.3),
    "cosine / max(cosine)": before(cosine_over_max=True),
    "reciprocal rank fusion, k = 10": before(rrf=10),
    "reciprocal rank fusion, k = 60": before(rrf=60),
    "context weight 0.3": before(context_weight=0.3),
    "context weight 0.45": before(context_weight=0.45),
    "cosine weight 0.7": before(cosine_weight=0.7),
    "query + 0.6 x mean of the best 3": before(feedback=3),
    "reach 2": before(window=2),
    "reach 3": before(window=3),
    "reach 2, cosine 0.7": before(window=2, cosine_weight=0.7),
    "reach 2, cosine 0.7, BM25 x (length / mean)^0.3": before(
        window=2, cosine_weight=0.7, length_power=0.3
    ),
    "reach 2, cosine 0.7, context 0.5 (the new default)": before(
        window=2, cosine_weight=0.7, context_weight=0.5
    ),
    "the engine's default now": Idea(),
}


def _family(**values: Sequence[Any]) -> list[Idea]:
    """Every combination of ``values`` as an Idea (the engine's defaults elsewhere)."""
    return [Idea(**dict(zip(values, point))) for point in itertools.product(*values.values())]


#: Ideas for LoCoMo's weak categories (multi-hop, open-domain), on top of the engine's
#: ranking; each family is tuned leave-one-conversation-out (with "off" among its choices).
WEAK_IDEAS: dict[str, list[Idea]] = {
    name: _family(**values) for name, values in recall_families.FAMILIES.items()
}


def _changes(idea: Idea) -> dict[str, Any]:
    return {k: v for k, v in vars(idea).items() if v != getattr(Idea(), k)}


def weak_categories(bench: Bench, show: Any, only: Sequence[str] = ()) -> dict[str, Any]:
    """LoCoMo R@10 per category for each family of WEAK_IDEAS (those whose names hold one
    of ``only``, if given): its best member in sample (with LongMemEval's headline
    metrics), and the family tuned leave-one-out."""
    out: dict[str, Any] = {"engine": bench.locomo_by_category(Idea())}
    show("the engine's default", out["engine"])
    for name, family in WEAK_IDEAS.items():
        if only and not any(part in name for part in only):
            continue
        rows = [bench.locomo_by_category(idea) for idea in family]
        best = max(range(len(family)), key=lambda n: rows[n]["overall"])
        changed = _changes(family[best])
        lme_row = bench.measure(family[best]) if bench.lme else {}
        out[name] = {
            "best": changed,
            "in_sample": rows[best],
            "longmemeval": {k: v for k, v in lme_row.items() if k.startswith("lme")},
            "held_out": held_out(bench, [Idea(), *family]),
            "members": [{"setting": _changes(i), "in_sample": r} for i, r in zip(family, rows)],
        }
        show(f"{name}, best {changed}", {**rows[best], **out[name]["longmemeval"]})
        show(f"{name}, held out", out[name]["held_out"])
    return out


#: Fusion weights for --loo: (cosine, context).
LOO_GRID = tuple(itertools.product((0.5, 0.6, 0.7, 0.8), (0.3, 0.45, 0.5, 0.6, 0.75)))


def leave_one_out(
    bench: Bench, shares: Sequence[float], reaches: Sequence[int]
) -> dict[str, float]:
    """Held-out recall when the weights (and sentence share, reach) are tuned on the rest."""
    ideas = [
        Idea(cosine_weight=cw, context_weight=ctx, whole_share=share, window=reach)
        for share in shares
        for reach in reaches
        for cw, ctx in LOO_GRID
    ]
    lme_rows = [bench.lme_scores(idea) for idea in ideas]
    held = [
        lme_rows[max(range(len(ideas)), key=lambda n: lme_rows[n].sum() - lme_rows[n][i].sum())][i]
        for i in range(len(bench.lme))
    ]
    result = {
        "lme turn all@10": float(100 * np.mean([h[0] for h in held])),
        "lme session all@5": float(100 * np.mean([h[1] for h in held])),
    }
    if bench.locomo:
        per_conv = [bench.locomo_scores(idea) for idea in ideas]

        def train(n: int, skip: int) -> float:
            rest = [x for k, x in enumerate(per_conv[n]) if k != skip]
            return float(np.concatenate(rest).mean())

        held_r10: list[float] = []
        for j in range(len(bench.locomo)):
            best = max(range(len(ideas)), key=lambda n: train(n, j))
            held_r10.extend(per_conv[best][j].tolist())
        result["locomo R@10"] = float(100 * np.mean(held_r10))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--lme", type=Path, default=lme.DEFAULT_DATA, help="LongMemEval JSON")
    parser.add_argument("--locomo", type=Path, default=locomo.DEFAULT_DATA, help="LoCoMo JSON")
    parser.add_argument("--tiny", action="store_true", help="generated LongMemEval questions only")
    parser.add_argument("--model", action="append", default=[], help="another static model spec")
    parser.add_argument("--loo", action="store_true", help="tune weights leave-one-out")
    parser.add_argument(
        "--weak",
        action="store_true",
        help="only the ideas for LoCoMo's weak categories (WEAK_IDEAS), per category",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PART",
        help="with --weak: only the families whose names hold PART (repeatable)",
    )
    args = parser.parse_args(argv)

    locomo_path: Path | None = None
    if args.tiny:
        lme_items = lme.tiny()
        if args.weak:
            if not args.locomo.is_file():
                parser.error(f"--weak needs LoCoMo data; no file at {args.locomo}")
            locomo_path = args.locomo
    else:
        for path, flag in ((args.lme, "--lme"), (args.locomo, "--locomo")):
            if not path.is_file():
                parser.error(f"no data at {path}; give it with {flag}")
        lme_items = json.loads(args.lme.read_text(encoding="utf-8"))
        locomo_path = args.locomo

    say = harness.Log(args.quiet)
    results: dict[str, Any] = {"ideas": {}, "models": {}}
    say("the engine's hybrid, before the parts these screens led to")
    engine = engine_baseline(lme_items, locomo_path)
    say("embedding and BM25 for the re-implementation")
    bench = load(load_embedder("builtin"), lme_items, locomo_path)
    mine = bench.measure(Idea())
    results["agreement"] = {"engine": engine, "re-implementation": mine}
    print("agreement, the engine before the kept parts: " + ", ".join(
        f"{k} engine {engine[k]:.1f} / here {mine[k]:.1f}" for k in engine
    ))  # fmt: skip
    gaps = [
        f"{k}: a gap above {TOLERANCE} points"
        for k in engine
        if abs(mine[k] - engine[k]) > TOLERANCE
    ]
    gaps += table_gaps(bench)
    if not harness.check(gaps, "agreement: OK", then="no idea was scored"):
        return 1

    def show(name: str, row: dict[str, float]) -> None:
        cells = "  ".join(f"{k} {v:5.1f}" for k, v in row.items())
        print(f"{name:<46} {cells}")

    if args.weak:
        results["weak_categories"] = weak_categories(bench, show, args.only)
        harness.write_json(args.json, results)
        return 0
    for name, idea in IDEAS.items():
        row = bench.measure(idea)
        results["ideas"][name] = row
        show(name, row)
    for spec in args.model:
        say(f"model {spec}")
        other = load(load_embedder(spec), lme_items, locomo_path)
        for name, idea in (
            ("hybrid", Idea()),
            ("alone", Idea(cosine_weight=1.0, context_weight=0.0)),
        ):
            row = other.measure(idea)
            results["models"][f"{spec} {name}"] = row
            show(f"{spec} {name}", row)
    if args.loo:
        say("leave-one-out tuning")
        for label, shares, reaches in (
            ("weights, reach 1", (1.0,), (1,)),
            ("weights, reach 1 or 2", (1.0,), (1, 2)),
            ("weights, reach 1, sentence vectors", (1.0, 0.7, 0.5), (1,)),
            ("weights, reach 1 or 2, sentence vectors", (1.0, 0.7, 0.5), (1, 2)),
        ):
            row = leave_one_out(bench, shares, reaches)
            results.setdefault("leave_one_out", {})[label] = row
            show(f"held out, tuned: {label}", row)
    harness.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
