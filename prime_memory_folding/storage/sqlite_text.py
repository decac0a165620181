"""SQLite's full-text search: BM25 on FTS5, planned in a large store.

Lexical ranking is BM25 over two FTS5 tables that triggers keep in sync with
``records`` (see migration 2): ``records_fts`` with a stemming tokenizer for
scripts that separate words with spaces, and ``records_grams``, a trigram index
of the records that hold text without word breaks (CJK, Thai, emoji...).
:meth:`~.sqlite.SQLiteStorage.lexical` answers a query text with it.

FTS5 computes BM25 for every row a query matches before it can sort them, and
a query is an OR of its words, so a common word makes it score a large share of
the store. Stores of up to ``exact_store`` records, and queries expected to
match at most ``budget`` records (``exact_store`` and ``lexical_budget`` of
:class:`~prime_memory_folding.recall.ranking.RankingSettings`), are ranked exactly
that way. In a larger store the other queries are planned (see
:func:`lexical_scores`): the rarer words choose at most ``budget`` records to
score, and each of those gets its BM25 over every word but the commonest.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.words import (
    UNSEGMENTED_GLOB,
    UNSEGMENTED_QUERY_RUN,
    SharesOf,
    choose_rare,
    content_words,
)
from .base import LexicalCandidates

__all__ = [
    "LEXICAL_DEPTH",
    "LexicalQuery",
    "WordShares",
    "lexical_scores",
    "parse_query",
    "text_search_schema",
]

#: BM25 hits taken from FTS before the structural gates are applied.
LEXICAL_DEPTH = 1000
#: How many of the newest records estimate the share of the store that holds a word.
SAMPLE_RECORDS = 4096
#: Most words whose sampled shares one engine remembers.
WORD_SHARES_KEPT = 4096
#: Trigram queries need three characters; shorter runs are found by substring scan.
_GRAM = 3


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


def text_search_schema() -> str:
    """The full-text indexes over ``records.content`` and the triggers that keep them.

    ``records_fts`` stems words (porter over unicode61, diacritics folded) and
    ranks by BM25. ``records_grams`` is a trigram index of only the records
    whose text has runs without word breaks (CJK, Thai, emoji), which unicode61
    cannot split into words. Both are external-content tables: the text itself
    stays in ``records`` (``id`` and ``content``), and the last statements index
    what it holds already.
    """
    glob = "'" + UNSEGMENTED_GLOB + "'"
    return f"""
        CREATE VIRTUAL TABLE records_fts USING fts5(
            content, content='records', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE records_grams USING fts5(
            content, content='records', content_rowid='id', tokenize='trigram'
        );
        CREATE TRIGGER records_fts_insert AFTER INSERT ON records BEGIN
            INSERT INTO records_fts (rowid, content) VALUES (new.id, new.content);
            INSERT INTO records_grams (rowid, content)
                SELECT new.id, new.content WHERE new.content GLOB {glob};
        END;
        CREATE TRIGGER records_fts_delete AFTER DELETE ON records BEGIN
            INSERT INTO records_fts (records_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
            INSERT INTO records_grams (records_grams, rowid, content)
                SELECT 'delete', old.id, old.content WHERE old.content GLOB {glob};
        END;
        CREATE TRIGGER records_fts_update AFTER UPDATE OF id, content ON records BEGIN
            INSERT INTO records_fts (records_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
            INSERT INTO records_grams (records_grams, rowid, content)
                SELECT 'delete', old.id, old.content WHERE old.content GLOB {glob};
            INSERT INTO records_fts (rowid, content) VALUES (new.id, new.content);
            INSERT INTO records_grams (rowid, content)
                SELECT new.id, new.content WHERE new.content GLOB {glob};
        END;
        INSERT INTO records_fts (rowid, content) SELECT id, content FROM records;
        INSERT INTO records_grams (rowid, content)
            SELECT id, content FROM records WHERE content GLOB {glob};
        """


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def parse_query(text: str) -> LexicalQuery:
    """Turn user text into FTS5 expressions that can never be read as FTS syntax.

    Every term is quoted, so operators (``NEAR``, ``AND``, ``*``, ``^``, column
    filters, quotes) are only words; terms are joined by OR and BM25 rewards
    the rows that match more of them.
    """
    unsegmented = UNSEGMENTED_QUERY_RUN.findall(text)
    words = content_words(text)
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


def lexical_scores(
    db: sqlite3.Connection,
    query: LexicalQuery,
    depth: int | None,
    store_size: int = 0,
    shares: WordShares | None = None,
    *,
    budget: int,
    exact_store: int,
) -> LexicalCandidates:
    """BM25 scores of the best ``depth`` matches (``depth=None``: of every match).

    The ranking is FTS5's own BM25 over every match when ``depth`` is None, in
    stores of at most ``exact_store`` records (``store_size``), and when the
    query's words are expected to match at most ``budget`` records
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
    - at most ``budget`` candidates are scored, the newest first,
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
    scores: dict[str, float] = {}
    limit = -1 if depth is None else depth
    exhaustive = True
    words = query.words
    if words is not None and depth is not None and store_size > exact_store:
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
    return LexicalCandidates(scores, exhaustive)


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

    def of_store(self, db: sqlite3.Connection, total: int) -> SharesOf:
        """Words' shares of a store of ``total`` records, for a query's vector
        (:func:`~prime_memory_folding.recall.query_weights.word_weights`)."""

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
    rare, other = choose_rare(known, estimate.__getitem__, store_size, budget)
    return _WordPlan(rare=tuple(terms[i] for i in rare), other=tuple(terms[i] for i in other))


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
