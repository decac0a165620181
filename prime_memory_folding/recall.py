"""Text recall: lexical ranking on FTS5, and hybrid fusion.

Lexical ranking is BM25 over two FTS5 tables that triggers keep in sync with
``records`` (see migration 2): ``records_fts`` with a stemming tokenizer for
scripts that separate words with spaces, and ``records_grams``, a trigram index
of the records that hold text without word breaks (CJK, Thai, emoji...).

FTS5 computes BM25 for every row a query matches before it can sort them, and
a query is an OR of its words, so a common word makes it score a large share of
the store. Stores of up to ``exact_store`` records, and queries expected to
match at most ``lexical_budget`` records (:class:`~.ranking.RankingSettings`),
are ranked exactly that way. In a
larger store the other queries are planned (see :func:`lexical_scores`): the
rarer words choose at most ``lexical_budget`` records to score, and each of
those gets its BM25 over every word but the commonest.

A hybrid query scores the rows that passed the structural gates:

    fused = (1 - cosine_weight) * bm25 / max(bm25) + cosine_weight * max(cosine, 0)

then adds ``context_weight`` times the best fused score of a row's neighbours:
the memories stored just before it and just after it in the same explicit
session (:mod:`.context`, whose pool of best candidates also brings their
neighbours in as candidates). The settings (:class:`~.ranking.RankingSettings`)
were chosen on three workloads at once, each held out in turn: LoCoMo (short
chat turns), LongMemEval (longer user messages) and a project's decision
records (``benchmarks/locomo_recall.py``, ``benchmarks/longmemeval_recall.py``,
``benchmarks/decisions_recall.py``).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from . import asking as asking_rule
from .context import Around, SessionCache, Sessions, neighbour_best, with_neighbours
from .errors import InvalidInput, NotAvailable
from .priors import time_closeness
from .query import RankedRow, top_k
from .query_weights import SharesOf
from .ranking import DEFAULT_RANKING, RankingSettings
from .words import STOPWORDS, UNSEGMENTED_GLOB
from .words import UNSEGMENTED_QUERY_RUN as _UNSEGMENTED_RUN
from .words import WORD as _WORD

if TYPE_CHECKING:
    from .index import Rows, StructuralIndex
    from .storage import Storage

__all__ = [
    "LexicalHits",
    "LexicalQuery",
    "WordShares",
    "check_text",
    "hybrid_rank",
    "lexical_scores",
    "parse_query",
]

#: BM25 hits taken from FTS before the structural gates are applied.
LEXICAL_DEPTH = 1000
#: How many of the newest records estimate the share of the store that holds a word.
SAMPLE_RECORDS = 4096
#: Most words whose sampled shares one engine remembers.
WORD_SHARES_KEPT = 4096
#: Trigram queries need three characters; shorter runs are found by substring scan.
_GRAM = 3


# -- lexical ------------------------------------------------------------------------


def check_text(text: object) -> str:
    """Raises InvalidInput unless ``text`` is a non-blank string."""
    if not isinstance(text, str):
        raise InvalidInput(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise InvalidInput("text is empty; give words to search for, or leave text out")
    if "\x00" in text:
        raise InvalidInput("text contains a NUL character; remove it")
    return text


@dataclass(frozen=True, slots=True)
class LexicalQuery:
    """A query text turned into safe FTS5 expressions."""

    #: For ``records_fts``: quoted terms joined by OR, or None.
    words: str | None
    #: For ``records_grams``: quoted trigrams joined by OR, or None.
    grams: str | None
    #: Runs shorter than a trigram, found by substring scan.
    short: tuple[str, ...]
    #: The quoted terms of ``words``, one by one.
    terms: tuple[str, ...] = ()


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def parse_query(text: str) -> LexicalQuery:
    """Turn user text into FTS5 expressions that can never be read as FTS syntax.

    Every term is quoted, so operators (``NEAR``, ``AND``, ``*``, ``^``, column
    filters, quotes) are only words; terms are joined by OR and BM25 rewards
    the rows that match more of them.
    """
    unsegmented = _UNSEGMENTED_RUN.findall(text)
    rest = _UNSEGMENTED_RUN.sub(" ", text)
    words = [w.lower() for w in _WORD.findall(rest)]
    content = [w for w in words if w not in STOPWORDS]
    words = list(dict.fromkeys(content or words))
    grams: list[str] = []
    short: list[str] = []
    for run in unsegmented:
        run = run.strip("\ufe0f\u200d")
        if not run:
            continue
        if len(run) < _GRAM:
            short.append(run)
        else:
            grams.extend(run[i : i + _GRAM] for i in range(len(run) - _GRAM + 1))
    terms = tuple(_quote(w) for w in words)
    return LexicalQuery(
        words=" OR ".join(terms) or None,
        grams=" OR ".join(_quote(g) for g in dict.fromkeys(grams)) or None,
        short=tuple(dict.fromkeys(short)),
        terms=terms,
    )


def _sqlite_db(storage: Storage, what: str) -> sqlite3.Connection:
    db = getattr(storage, "db", None)
    if not isinstance(db, sqlite3.Connection):
        raise NotAvailable(f"{what} needs the embedded SQLite store, not {type(storage).__name__}")
    return db


@dataclass(frozen=True, slots=True)
class LexicalHits:
    """BM25 scores (higher is better) by record id."""

    scores: dict[str, float]
    #: Whether every record that matches the query is in ``scores``, so that
    #: looking deeper cannot find more (a gate that dropped most hits needs that).
    exhaustive: bool


def lexical_scores(
    storage: Storage,
    query: LexicalQuery,
    depth: int | None,
    store_size: int = 0,
    shares: WordShares | None = None,
    settings: RankingSettings = DEFAULT_RANKING,
) -> LexicalHits:
    """BM25 scores of the best ``depth`` matches (``depth=None``: of every match).

    The ranking is FTS5's own BM25 over every match when ``depth`` is None, in
    stores of at most ``settings.exact_store`` records (``store_size``), and when the
    query's words are expected to match at most ``settings.lexical_budget`` records
    in all. A broader query in a larger store is planned instead, from each
    word's share of the newest :data:`SAMPLE_RECORDS` records:

    - a word in no record is left out: it matches nothing and adds nothing to
      any BM25 score, so the plan is the one the other words make. (Only the
      words in none of the newest records are looked up in the whole store.)
    - a word estimated to be in more than half of the store is left out (when
      all are, the rarest stays). FTS5 gives a word in half of the records or
      more an IDF of 1e-6, so it adds under 3e-6 to a score; leaving it out
      matters only when the estimate, drawn from the newest records, is wrong
      for the whole store.
    - the rarest words whose estimated matches fit the budget together (always
      the rarest one) choose the candidates: the records that hold one of them.
      A record that holds only the other words gets no BM25 score; the vector
      side can still find it.
    - every candidate gets the exact BM25 of all the words kept. Records that
      hold another word too are scored by ``rare AND (others)``, in which each
      word is one phrase, so FTS5 sums every word's part; the rest hold none of
      the others, so BM25 over the rare words alone is their whole score.
    - at most ``settings.lexical_budget`` candidates are scored, the newest first,
      those that hold another word before the others. When the rarest word alone
      is more common than that, the older records that hold it are left to the
      vector side.

    ``shares`` remembers the sampled shares between queries (see
    :class:`WordShares`); without it every planned query samples afresh.
    ``exhaustive`` is False for a planned query, except when the rare words
    were all its words but those left out, and every record that holds one fit
    the budget: a deeper look could then add only records whose score is the
    left-out words' few millionths.
    """
    db = _sqlite_db(storage, "text queries")
    scores: dict[str, float] = {}
    limit = -1 if depth is None else depth
    exhaustive = True
    words = query.words
    budget = settings.lexical_budget
    if words is not None and depth is not None and store_size > settings.exact_store:
        plan = _plan_words(db, query.terms, store_size, shares, budget)
        if plan is not None:
            scored = _planned_scores(db, plan, scores, budget)
            if len(scores) > depth:
                scores = dict(sorted(scores.items(), key=lambda kv: kv[1], reverse=True)[:depth])
            words = None
            exhaustive = not plan.other and scored < budget and len(scores) < depth
    tables = (("records_fts", words), ("records_grams", query.grams))
    for table, expression in tables:
        if expression is None:
            continue
        sql = (
            f"SELECT r.record_id, -m.rank FROM (SELECT rowid, rank FROM {table} "
            f"WHERE {table} MATCH ? ORDER BY rank LIMIT ?) AS m "
            "JOIN records AS r ON r.id = m.rowid"
        )
        found = 0
        for rid, score in db.execute(sql, (expression, limit)):
            scores[rid] = scores.get(rid, 0.0) + max(float(score), 1e-9)
            found += 1
        exhaustive = exhaustive and found != limit
    if query.short:
        # Too short for the trigram index: scan the records that index holds text for.
        condition = " + ".join("(instr(content, ?) > 0)" for _ in query.short)
        sql = (
            f"SELECT record_id, {condition} AS n FROM records "
            f"WHERE content GLOB ? AND n > 0 LIMIT ?"
        )
        found = 0
        for rid, hits in db.execute(sql, (*query.short, UNSEGMENTED_GLOB, limit)):
            scores[rid] = scores.get(rid, 0.0) + float(hits)
            found += 1
        exhaustive = exhaustive and found != limit
    return LexicalHits(scores, exhaustive)


class WordShares:
    """Query words' shares of the newest records, remembered between queries.

    A share only steers which records a planned query scores (see
    :func:`lexical_scores`), never a score, so it may be a little stale: the memo
    is emptied once a quarter of :data:`SAMPLE_RECORDS` records has been added
    since it was started, and when it holds :data:`WORD_SHARES_KEPT` words.
    """

    def __init__(self) -> None:
        self._shares: dict[str, float] = {}
        self._started_at = -1  # the newest record id when the memo was started

    def get(self, db: sqlite3.Connection, terms: Sequence[str]) -> list[float] | None:
        """Each term's share of the newest records; None for an empty store."""
        newest = db.execute("SELECT max(id) FROM records").fetchone()[0]
        if newest is None:
            return None
        newest = int(newest)
        # One memo for this call: reads running at once may start a new one.
        shares = self._shares
        added = newest - self._started_at
        if not 0 <= added < SAMPLE_RECORDS // 4 or len(shares) >= WORD_SHARES_KEPT:
            shares = self._shares = {}
            self._started_at = newest
        missing = [term for term in dict.fromkeys(terms) if term not in shares]
        if missing:
            sampled = _sample_shares(db, missing, newest - SAMPLE_RECORDS)
            if sampled is None:
                return None
            shares.update(zip(missing, sampled))
        return [shares[term] for term in terms]

    def of_store(self, storage: Storage, total: int) -> SharesOf:
        """Words' shares of a SQLite store of ``total`` records, for a query's vector
        (:func:`~prime_memory_folding.query_weights.word_weights`)."""
        db = _sqlite_db(storage, "text queries")

        def shares(words: Sequence[str]) -> tuple[list[float | None], int] | None:
            found = self.get(db, [_quote(word) for word in words])
            return None if found is None else (list[float | None](found), total)

        return shares


def _sample_shares(db: sqlite3.Connection, terms: Sequence[str], since: int) -> list[float] | None:
    """The share of the records after id ``since`` that hold each term; None if none are."""
    counts = ", ".join(
        "(SELECT count(*) FROM records_fts WHERE records_fts MATCH ? AND rowid > ?)" for _ in terms
    )
    params: list[object] = [since]
    for term in terms:
        params += [term, since]
    # The FTS5 row-size table is far narrower than ``records``: one row per record.
    sampled, *hits = db.execute(
        f"SELECT (SELECT count(*) FROM records_fts_docsize WHERE id > ?), {counts}", params
    ).fetchone()
    if not sampled:
        return None
    return [count / sampled for count in hits]


@dataclass(frozen=True, slots=True)
class _WordPlan:
    """Which words choose the candidates of a planned query, and which only score them."""

    rare: tuple[str, ...]
    other: tuple[str, ...]


def _plan_words(
    db: sqlite3.Connection,
    terms: Sequence[str],
    store_size: int,
    shares: WordShares | None,
    budget: int,
) -> _WordPlan | None:
    """A plan for a query too broad to score every match; None when it is not."""
    if not terms:
        return None
    share = (shares or WordShares()).get(db, terms)
    if share is None:
        return None
    estimate = [part * store_size for part in share]
    if sum(estimate) <= budget:
        return None
    # A word in none of the newest records may be in no record at all: it would
    # then choose no candidate, and it adds nothing to any record's BM25.
    unsampled = [term for term, part in zip(terms, share) if part == 0.0]
    held = _held_terms(db, unsampled)
    known = [i for i in range(len(terms)) if share[i] > 0.0 or terms[i] in held]
    by_rarity = sorted(known, key=lambda i: estimate[i])
    kept = [i for i in by_rarity if estimate[i] <= store_size / 2] or by_rarity[:1]
    rare = [kept[0]]
    total = estimate[kept[0]]
    for i in kept[1:]:
        if total + estimate[i] > budget:
            break
        rare.append(i)
        total += estimate[i]
    return _WordPlan(
        rare=tuple(terms[i] for i in rare),
        other=tuple(terms[i] for i in kept[len(rare) :]),
    )


def _held_terms(db: sqlite3.Connection, terms: Sequence[str]) -> set[str]:
    """Those of ``terms`` that some record holds."""
    if not terms:
        return set()
    held = ", ".join("EXISTS (SELECT 1 FROM records_fts WHERE records_fts MATCH ?)" for _ in terms)
    row = db.execute(f"SELECT {held}", list(terms)).fetchone()
    return {term for term, found in zip(terms, row) if found}


def _planned_scores(
    db: sqlite3.Connection, plan: _WordPlan, scores: dict[str, float], budget: int
) -> int:
    """Score the plan's candidates, newest first, up to the budget; returns how many."""
    rare = " OR ".join(plan.rare)
    select = (
        "SELECT m.rowid, r.record_id, max(-m.score, 1e-9) FROM (SELECT rowid, "
        "bm25(records_fts) AS score FROM records_fts WHERE records_fts MATCH ? {} "
        "ORDER BY rowid DESC LIMIT ?) AS m JOIN records AS r ON r.id = m.rowid"
    )
    first = f"({rare}) AND ({' OR '.join(plan.other)})" if plan.other else rare
    rows = db.execute(select.format(""), (first, budget)).fetchall()
    room = budget - len(rows)
    if plan.other and room > 0:
        # The first query found every record that holds a rare word and another
        # one; the others hold only rare words, so BM25 over those is their score
        # (and FTS5 need not count the common words' matches again).
        seen = json.dumps([row[0] for row in rows])
        excluding = "AND rowid NOT IN (SELECT value FROM json_each(?))"
        rows += db.execute(select.format(excluding), (rare, seen, room)).fetchall()
    scores.update((rid, score) for _, rid, score in rows)
    return len(rows)


# -- fusion -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Lexical:
    """The lexical side by index row (sorted): the query's BM25, and what fusion reads."""

    rows: npt.NDArray[np.int64]
    raw: npt.NDArray[np.float64]
    norm: npt.NDArray[np.float64]
    lent: npt.NDArray[np.float64] | None = None

    @classmethod
    def of(cls, scores: dict[int, float]) -> _Lexical:
        rows = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
        raw = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
        order = np.argsort(rows)
        rows, raw = rows[order], raw[order]
        top = float(raw.max()) if len(raw) else 0.0
        return cls(rows, raw, raw / top if top > 0 else raw)

    def at(
        self, rows: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """``values`` (one per row of this side) at ``rows``, 0 where it has none."""
        out = np.zeros(len(rows))
        if len(self.rows):
            at = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
            hit = self.rows[at] == rows
            out[hit] = values[at[hit]]
        return out

    def lending(self, scores: dict[int, float], weight: float) -> _Lexical:
        """This side with ``weight`` of it the BM25 of words its first hits lent."""
        lent = _Lexical.of(scores)
        rows = np.union1d(self.rows, lent.rows)
        share = lent.at(rows, lent.norm)
        norm = (1 - weight) * self.at(rows, self.norm) + weight * share
        return _Lexical(rows, self.at(rows, self.raw), norm, share)


class _Ranking(NamedTuple):
    """One fusion of a query's candidates (``hybrid_rank``), per candidate row."""

    candidates: npt.NDArray[np.int64]
    final: npt.NDArray[np.float64]
    matched: npt.NDArray[np.float64]  # the final score less the time prior
    context: npt.NDArray[np.float64]
    closeness: npt.NDArray[np.float64] | None
    asking: npt.NDArray[np.bool_] | None


def hybrid_rank(
    index: StructuralIndex,
    gate_rows: Rows | None,
    lexical: dict[int, float],
    query_vector: npt.NDArray[np.float32] | None,
    limit: int,
    *,
    settings: RankingSettings,
    window: tuple[float, float] | None = None,
    lend: Callable[[Sequence[str]], dict[int, float]] | None = None,
    asks: asking_rule.Asker | None = None,
    sessions: SessionCache | None = None,
) -> list[RankedRow]:
    """Fuse BM25 (by index row, already gated) and cosine over ``gate_rows`` (None: all).

    ``settings`` hold the weights (:class:`~.ranking.RankingSettings`).
    ``window`` is the span of time the query names, if any: each memory then
    gains ``time_weight`` times its closeness to it
    (:func:`~prime_memory_folding.priors.time_closeness` of when it was first
    stored). ``lend``, given the record ids of the first ``lend_docs`` hits,
    answers the BM25 by row (gated) of the words they lend; the query then
    ranks again with that share of its lexical side (:mod:`.feedback`; only
    with a query vector). ``asks`` says which records (by id) only ask
    (:mod:`.asking`), for the best candidates and the memories before them in
    their sessions. ``sessions`` keeps the index's session order between
    queries (:mod:`.context`). Score parts: ``bm25``, ``bm25_norm``,
    ``cosine`` (when there is a query vector in the index's space), ``lent``
    (when lent words match), ``context`` (when a session neighbour lifted the
    score), ``asks`` (1 for a memory that only asks), ``time`` (the
    closeness, when the query names a window) and ``fused``; without a query
    vector ``lexical_only`` is 1.
    """
    context_weight = settings.context_weight if settings.context_reach else 0.0
    time_weight = settings.time_weight
    if limit <= 0:
        return []
    if gate_rows is None:
        if len(index) == 0:
            return []
    elif len(gate_rows) == 0:
        return []
    cos_raw: npt.NDArray[np.float32] | None = None
    cos_pos: npt.NDArray[np.float32] | None = None
    use_vector = query_vector is not None and index.dim == len(query_vector)
    if use_vector:
        assert query_vector is not None
        cos_raw = index.cosine(gate_rows, query_vector)
        cos_pos = np.where(np.isfinite(cos_raw), cos_raw, np.float32(0.0))
        np.maximum(cos_pos, np.float32(0.0), out=cos_pos)
    w_cos = settings.cosine_weight if use_vector else 0.0
    w_lex = 1.0 - w_cos

    def position(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        if gate_rows is None:
            return rows
        return np.searchsorted(gate_rows, rows).astype(np.int64)

    # Candidates: every lexical hit, plus the best by cosine (whose lexical part is 0).
    spare = 0 if cos_pos is None else limit * (3 if context_weight else 1)
    by_cosine = np.zeros(0, dtype=np.int64)
    if cos_pos is not None and spare:
        best = top_k(cos_pos, min(spare, len(cos_pos)))
        by_cosine = best if gate_rows is None else gate_rows[best]

    def said(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return np.array(asks(index.record_ids(rows)) if asks else [], dtype=bool)

    # The session order is read once for every neighbour look-up of both fusions.
    asking_on = asks is not None and settings.ask_penalty > 0
    around = None
    if context_weight or asking_on:
        order = (sessions or SessionCache()).order(index)
        if len(order.rows):
            around = Sessions(order, gate_rows, max(settings.context_reach, 1))
    pool = settings.context_pool

    def ranked(side: _Lexical) -> _Ranking:
        candidates = np.union1d(side.rows, by_cosine)  # ties go to the older row

        def fused_of(rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
            score = w_lex * side.at(rows, side.norm)
            if cos_pos is not None:
                score += w_cos * cos_pos[position(rows)]
            return score

        fused = fused_of(candidates)
        # The pool's neighbours join, but a keyword search keeps to its matches.
        if around is not None and context_weight and cos_pos is not None:
            candidates = with_neighbours(around, candidates, fused, pool)
            fused = fused_of(candidates)
        context = np.zeros(len(candidates))
        if around is not None and context_weight and len(candidates):
            context = neighbour_best(around, candidates, fused_of)
        matched = fused + context_weight * context
        prior = np.zeros(len(candidates))
        closeness = None
        if window is not None and time_weight and len(candidates):
            stored = index.created_at(candidates)
            closeness = time_closeness(stored, window, settings.time_tail)
            prior = time_weight * closeness
        asking = None
        if asking_on and around is not None and len(candidates):
            top = top_k(matched + prior, min(settings.ask_pool, len(candidates)))
            matched, asking = _asking(
                around,
                (candidates, top),
                (matched, fused),
                (settings, context_weight),
                fused_of,
                said,
            )
        return _Ranking(candidates, matched + prior, matched, context, closeness, asking)

    side = _Lexical.of(lexical)
    found = ranked(side)
    lend_on = lend is not None and cos_pos is not None and settings.lend_weight > 0
    if lend_on and len(found.candidates):
        assert lend is not None
        lexical_hit = side.at(found.candidates, side.raw) > 0
        leading = np.where((found.matched > 0) | lexical_hit, found.final, -np.inf)
        first = top_k(leading, min(settings.lend_docs, len(leading)))
        lent = lend(index.record_ids(found.candidates[first[np.isfinite(leading[first])]]))
        if lent:
            side = side.lending(lent, settings.lend_weight)
            found = ranked(side)
    candidates, final, matched, context, closeness, asking = found
    if len(candidates) == 0:
        return []
    order_ = top_k(final, limit)
    chosen = candidates[order_]
    raw_of = side.at(chosen, side.raw)
    norm_of = side.at(chosen, side.norm)
    lent_of = None if side.lent is None else side.at(chosen, side.lent)
    cos_of = None if cos_raw is None else cos_raw[position(chosen)]
    hits = []
    for n, i in enumerate(order_.tolist()):
        parts = {"bm25": float(raw_of[n]), "bm25_norm": float(norm_of[n])}
        if cos_of is not None:
            cosine = float(cos_of[n])
            parts["cosine"] = cosine if math.isfinite(cosine) else 0.0
        if lent_of is not None and lent_of[n] > 0:
            parts["lent"] = float(lent_of[n])
        if context_weight and context[i] > 0:
            parts["context"] = float(context[i])
        if asking is not None and asking[i]:
            parts["asks"] = 1.0
        if closeness is not None:
            parts["time"] = float(closeness[i])
        if cos_pos is None:
            parts["lexical_only"] = 1.0
        parts["fused"] = float(final[i])
        if matched[i] <= 0 and parts["bm25"] <= 0:  # a prior alone is no match
            continue
        hits.append(RankedRow(int(chosen[n]), float(final[i]), parts))
    return hits


def _asking(
    around: Sessions,
    pooled: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    scores: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]],
    weights: tuple[RankingSettings, float],
    fused_of: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float64]],
    asks: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """``matched`` (of ``scores``: the matched and fused scores) with the pool's
    memories (``pooled``: the candidates, and the positions of the best of
    them) that only ask, in a session, given ``1 - ask_penalty`` of their
    fused score, and the memory after each one in its session more of its
    score as context; and which candidates only ask. A memory without a
    session is a note, not a turn of a conversation: no answer follows it, and
    the rule leaves it as it is."""
    candidates, pool = pooled
    matched, fused = scores
    settings, context_weight = weights
    rows = candidates[pool]
    near = Around(around, rows)
    before, ok = near.step(-1)
    in_session = near.at >= 0
    said = asks(np.concatenate([rows[in_session], before[ok]]))
    mine, theirs = np.zeros(len(rows), dtype=bool), np.zeros(len(rows), dtype=bool)
    mine[in_session] = said[: int(in_session.sum())]
    theirs[ok] = said[int(in_session.sum()) :]
    lent = np.zeros(len(rows))
    if theirs.any():
        lent[theirs] = (context_weight + settings.ask_lend) * fused_of(before[theirs])
    own = fused[pool] * np.where(mine, 1.0 - settings.ask_penalty, 1.0)
    out = matched.copy()
    out[pool] = own + np.maximum(matched[pool] - fused[pool], lent)
    flags = np.zeros(len(candidates), dtype=bool)
    flags[pool] = mine
    return out, flags
