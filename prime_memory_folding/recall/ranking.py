"""How a text query ranks: every setting of the hybrid ranking as one frozen value.

``MemoryEngine(ranking=RankingSettings(...))`` takes one; ``engine.ranking``
reads it, and assigning a new value changes how later queries rank (the value
itself never changes). ``docs/recall.md`` says what each part does and when it
applies; each part can be switched off, and :meth:`RankingSettings.parts_off`
switches off every part beyond the fusion of BM25 and cosine.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..errors import InvalidInput

__all__ = ["DEFAULT_RANKING", "RankingSettings"]


@dataclass(frozen=True, slots=True)
class RankingSettings:
    """The hybrid ranking's weights and bounds.

    Fusion:
        cosine_weight: weight of cosine similarity against max-normalised BM25
            (``fused = (1 - w) * bm25 / max + w * max(cosine, 0)``).
        long_query_shift: how much of that weight moves to BM25 for a long
            query: none up to ``long_query_words`` distinct content words, all
            of it at twice as many, in proportion between. A long query gives
            BM25 many words to match, while a static model's mean over many
            words blurs. 0 turns it off.
        long_query_words: where a query starts to count as long.

    Sessions (only memories stored with the same ``session``, in stored order):
        context_weight: share of the best neighbour's fused score a memory
            gains; 0 turns neighbour context off.
        context_reach: neighbours on each side of a memory in its session.
        context_pool: the best candidates whose session neighbours join the
            candidates (a hybrid query only); 0: none.

    Time:
        time_weight: weight of a memory's closeness to the span of time the
            query names ("last week", "in May 2023"); 0 turns the prior off.
        time_tail: outside the span, closeness falls by e every this many span
            lengths (at least half a week).

    Query weights:
        query_idf: power of each word's IDF in the store that weighs its tokens
            in the query's vector (model2vec embedders); 0: unweighted.
        stopword_share: the share of the store a stop word counts as held by.

    Questions (a hybrid query, within one session):
        ask_penalty: share of its fused score a memory that only asks loses;
            0 turns the rule off.
        ask_lend: the extra share of an asking memory's score its successor in
            the session takes as context.
        ask_pool: how many of the best candidates are checked.

    Lexical feedback (a hybrid query):
        lend_weight: share of the lexical side the words lent by the first hits
            take; 0 turns feedback off.
        lend_docs: the first hits that lend.
        lend_words: the most words they lend.
        lend_common: a lent word is held by at most this share of the store...
        lend_most: ...and by at most this many records.

    Bounds of a planned query (not weights; see docs/recall.md):
        exact_store: stores of at most this many records rank text exactly.
        lexical_budget: in a larger store, the most rows one text query scores
            with BM25.
        window_max: on PostgreSQL, the gated records a query ranks at once
            (a vector query), or the newest a text query's window holds when
            the store has neither pgvector nor the vector cache.
        nearest_keep: on PostgreSQL, the nearest records (pgvector's, or the
            vector cache's) a text query's window holds, at least (four
            times the limit when more).
    """

    cosine_weight: float = 0.7
    long_query_shift: float = 0.2
    long_query_words: int = 8
    context_weight: float = 0.5
    context_reach: int = 2
    context_pool: int = 20
    time_weight: float = 0.4
    time_tail: float = 0.5
    query_idf: float = 0.5
    stopword_share: float = 0.1
    ask_penalty: float = 0.3
    ask_lend: float = 0.2
    ask_pool: int = 50
    lend_weight: float = 0.2
    lend_docs: int = 5
    lend_words: int = 10
    lend_common: float = 0.1
    lend_most: int = 400
    exact_store: int = 10_000
    lexical_budget: int = 400
    window_max: int = 20_000
    nearest_keep: int = 40

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            kind = int if spec.type in ("int", int) else float
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidInput(
                    f"ranking setting {spec.name} must be a number, not {type(value).__name__}"
                )
            if kind is int and not isinstance(value, int):
                raise InvalidInput(f"ranking setting {spec.name} must be a whole number")
            if value < 0 or value != value:
                raise InvalidInput(f"ranking setting {spec.name} must be 0 or more, not {value}")
        for name in (
            "cosine_weight",
            "long_query_shift",
            "ask_penalty",
            "lend_weight",
            "lend_common",
        ):
            if getattr(self, name) > 1:
                raise InvalidInput(f"ranking setting {name} must be between 0 and 1")
        for name in ("exact_store", "lexical_budget", "window_max"):
            if getattr(self, name) < 1:
                raise InvalidInput(f"ranking setting {name} must be at least 1")

    def for_query(self, words: int) -> RankingSettings:
        """These settings as a query of ``words`` distinct content words ranks with
        them: the cosine weight less its long-query shift."""
        start = self.long_query_words
        if not self.long_query_shift or words <= start:
            return self
        share = min(1.0, (words - start) / max(start, 1))
        cosine = max(self.cosine_weight - share * self.long_query_shift, 0.0)
        return replace(self, cosine_weight=cosine)

    def parts_off(self) -> RankingSettings:
        """These settings with every part beyond the fusion switched off: no
        long-query shift, session context, time prior, query weights, question
        rule or feedback."""
        return replace(
            self,
            long_query_shift=0.0,
            context_weight=0.0,
            context_pool=0,
            time_weight=0.0,
            query_idf=0.0,
            ask_penalty=0.0,
            lend_weight=0.0,
        )

    def but(self, **changes: float) -> RankingSettings:
        """These settings with ``changes`` (setting names and values)."""
        unknown = sorted(set(changes) - {spec.name for spec in fields(self)})
        if unknown:
            raise InvalidInput(f"unknown ranking setting(s): {', '.join(unknown)}")
        return replace(self, **changes)  # type: ignore[arg-type]


#: The defaults (a frozen value: replace it, never change it).
DEFAULT_RANKING = RankingSettings()
