"""Text search on the PostgreSQL store: BM25 over the ``lex`` tsvector's candidates.

The candidates come from the GIN index on ``lex`` (PostgreSQL's ``english``
configuration: Snowball stems, stop words left out, Latin diacritics folded),
gated in the same statement. Each is scored with FTS5's BM25 formula
(:func:`bm25`), from document frequencies and the store's average length that
:class:`TextSearch` keeps per process, read again after
:data:`STATS_STALE_CHANGES` changes (or 1% of the store); a word counted in
no record is counted again at each query, so that it is found once stored.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.index import TagQuery
from ..core.words import UNSEGMENTED_QUERY_RUN, choose_rare
from .base import LexicalCandidates
from .pg_rows import gate_sql
from .pg_schema import folded

__all__ = ["STATS_STALE_CHANGES", "TextSearch", "bm25", "unsegmented_pieces"]

#: A document's length in tokens, over ``unnest(lex) AS u`` (a stripped lexeme counts once).
_TOKENS = "coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)"
#: FTS5's BM25 parameters.
K1 = 1.2
B = 0.75
#: Newest records sampled for the average document length.
LENGTH_SAMPLE = 2_000
#: Change-log entries after which cached text statistics are read again.
STATS_STALE_CHANGES = 1_000
#: Characters of text without word breaks (CJK, Thai, emoji...) a substring test
#: looks for at once (SQLite's trigrams).
PIECE = 3
#: Most pieces of a query's unsegmented text looked for (the first ones).
MAX_PIECES = 32

Run = Callable[..., Any]


def bm25(tf: float, df: int, dl: float, avgdl: float, total: int) -> float:
    """One term's part of FTS5's BM25 score (higher is better).

    ``total`` may lag ``df`` (the store's size is read again only every so
    often, a word's count when first asked): a word then counted in more
    records than ``total`` weighs as one in every record, almost nothing.
    """
    idf = math.log((max(total - df, 0) + 0.5) / (df + 0.5))
    if idf <= 0.0:
        idf = 1e-6
    return idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / max(avgdl, 1e-9)))


@dataclass
class _TextStats:
    """What BM25 needs of the whole store, read again every so often."""

    seq: int = -1
    total: int = 0
    avgdl: float = 1.0
    df: dict[str, int] | None = None


class TextSearch:
    """A store's text search, with the statistics BM25 needs cached.

    Args:
        run: runs one statement (``%s`` placeholders) and returns its rows.
        newest: the newest change-log position, which says when to read the
            statistics again.
    """

    def __init__(self, run: Run, newest: Callable[[], int]) -> None:
        self._run = run
        self._newest = newest
        self._stats = _TextStats()
        self._stats_lock = threading.Lock()

    def _text_stats(self) -> _TextStats:
        """The store's size and average length, read again after enough changes."""
        with self._stats_lock:
            seq = self._newest()
            stats = self._stats
            if stats.df is None or abs(seq - stats.seq) >= max(
                STATS_STALE_CHANGES, stats.total // 100
            ):
                row = self._run("SELECT count(*) FROM records").fetchone()
                total = int(row[0]) if row else 0
                sample = self._run(
                    f"SELECT avg((SELECT {_TOKENS} FROM unnest(r.lex) AS u)) "
                    "FROM (SELECT lex FROM records ORDER BY id DESC LIMIT %s) AS r",
                    (LENGTH_SAMPLE,),
                ).fetchone()
                avgdl = float(sample[0]) if sample and sample[0] is not None else 1.0
                self._stats = stats = _TextStats(seq=seq, total=total, avgdl=avgdl, df={})
            return stats

    def _frequencies(self, stats: _TextStats, lexemes: Sequence[str]) -> dict[str, int]:
        assert stats.df is not None
        # A word counted in no record is counted again: stored since, it must be found.
        missing = [lex for lex in lexemes if not stats.df.get(lex)]
        if missing:  # one statement, whatever the count
            rows = self._run(
                "SELECT (SELECT count(*) FROM records WHERE lex @@ q::tsquery) "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS t(q, n) ORDER BY n",
                ([_tsquery([lex]) for lex in missing],),
            ).fetchall()
            stats.df.update((lex, int(count)) for lex, (count,) in zip(missing, rows))
        return {lex: stats.df[lex] for lex in lexemes}

    def word_shares(self, words: Sequence[str]) -> tuple[list[float | None], int] | None:
        """Each word's share of the records (by its lexemes' counts; None for a word
        the index keeps no lexeme of, such as a stop word) and the store's size."""
        rows = self._run(
            "SELECT coalesce((SELECT array_agg(lexeme) FROM unnest(to_tsvector('english', "
            f"{folded('w')}))), '{{}}') FROM unnest(%s::text[]) WITH ORDINALITY AS t(w, n) "
            "ORDER BY n",
            (list(words),),
        ).fetchall()
        stats = self._text_stats()
        if stats.total == 0:
            return None
        df = self._frequencies(stats, sorted({lex for (found,) in rows for lex in found}))
        shares = [
            max(df[lex] for lex in found) / stats.total if found else None for (found,) in rows
        ]
        return shares, stats.total

    def lexical(self, text: str, gates: TagQuery, budget: int) -> LexicalCandidates:
        """BM25 scores of a text query's gated candidates (FTS5's formula).

        The query's words are stemmed as the records' (PostgreSQL's ``english``
        configuration). A word in no record is left out, and so is a word in
        more than half of the store (unless every word left is), as FTS5's
        BM25 gives it almost nothing. When the
        words left match more than ``budget`` records, the rarest words that fit
        the budget together choose the candidates, and the newest ``budget`` of
        them are scored; ``exhaustive`` then says False. Text without word
        breaks (CJK, Thai, emoji...) adds, for each record that holds some of
        it, how many of its pieces it holds (:func:`unsegmented_pieces`).
        """
        words = self._word_scores(UNSEGMENTED_QUERY_RUN.sub(" ", text), gates, budget)
        pieces = unsegmented_pieces(text)
        if not pieces:
            return words
        found = self._piece_scores(pieces, gates, budget)
        scores = dict(words.scores)
        for rid, score in found.scores.items():
            scores[rid] = scores.get(rid, 0.0) + score
        return LexicalCandidates(scores, words.exhaustive and found.exhaustive)

    def _piece_scores(
        self, pieces: Sequence[str], gates: TagQuery, budget: int
    ) -> LexicalCandidates:
        """How many of ``pieces`` each gated record's content holds, newest records first.

        PostgreSQL's parser keeps a run of text without word breaks as one
        word, so such text is found by substring tests over the gated records
        (the SQLite store has a trigram index for it): at most ``budget``
        records, the newest.
        """
        where, params = gate_sql(gates)
        where.append("(" + " OR ".join("strpos(content, %s) > 0" for _ in pieces) + ")")
        params.extend(pieces)
        held = " + ".join("(strpos(content, %s) > 0)::int" for _ in pieces)
        sql = (
            f"SELECT record_id, {held} FROM records WHERE {' AND '.join(where)} "
            "ORDER BY id DESC LIMIT %s"
        )
        rows = self._run(sql, [*pieces, *params, budget + 1]).fetchall()
        scores = {rid: float(n) for rid, n in rows[:budget]}
        return LexicalCandidates(scores, len(rows) <= budget)

    def _word_scores(self, text: str, gates: TagQuery, budget: int) -> LexicalCandidates:
        """BM25 of the query's words (the text without its unsegmented runs)."""
        row = self._run(
            "SELECT coalesce(array_agg(lexeme ORDER BY lexeme), '{}') "
            f"FROM unnest(to_tsvector('english', {folded('%s')}))",
            (text,),
        ).fetchone()
        lexemes: list[str] = list(row[0]) if row else []
        if not lexemes:
            return LexicalCandidates({}, True)
        stats = self._text_stats()
        df = self._frequencies(stats, lexemes)
        total = max(stats.total, 1)
        # A word in no record matches nothing and adds nothing to a score: the
        # answer is the one the other words give.
        known = [lex for lex in lexemes if df[lex] > 0]
        if not known:
            return LexicalCandidates({}, True)
        choosers, others = choose_rare(known, df.__getitem__, total, budget)
        kept = [*choosers, *others]
        where, params = gate_sql(gates)
        where.insert(0, "lex @@ %s::tsquery")
        params.insert(0, _tsquery(choosers))
        sql = (
            f"SELECT record_id, (SELECT {_TOKENS} FROM unnest(lex) AS u), "
            "ARRAY(SELECT u.lexeme || ' ' || coalesce(array_length(u.positions, 1), 1) "
            "FROM unnest(lex) AS u WHERE u.lexeme = ANY(%s)) FROM records "
            f"WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT %s"
        )
        rows = self._run(sql, [kept, *params, budget + 1]).fetchall()
        exhaustive = len(rows) <= budget and len(choosers) == len(kept)
        scores: dict[str, float] = {}
        for rid, length, parts in rows[:budget]:
            score = 0.0
            for part in parts:
                lex, _, count = part.rpartition(" ")
                score += bm25(float(count), df[lex], float(length), stats.avgdl, total)
            scores[rid] = max(score, 1e-9)
        return LexicalCandidates(scores, exhaustive)


def unsegmented_pieces(text: str) -> list[str]:
    """What a text query's runs without word breaks are found by, as on SQLite.

    A run shorter than :data:`PIECE` characters is looked for whole, a longer
    one by each of its :data:`PIECE`-character pieces, the first
    :data:`MAX_PIECES` of them in all.
    """
    pieces: list[str] = []
    for run in UNSEGMENTED_QUERY_RUN.findall(text):
        run = run.strip("\ufe0f\u200d")
        if len(run) < PIECE:
            pieces.extend([run] if run else [])
        else:
            pieces.extend(run[i : i + PIECE] for i in range(len(run) - PIECE + 1))
    return list(dict.fromkeys(pieces))[:MAX_PIECES]


def _tsquery(lexemes: Sequence[str]) -> str:
    """A tsquery matching any of ``lexemes``, each quoted as a literal."""
    return " | ".join("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)
