"""How the engine answers reads: gates, ranking, and the rows of the hits.

:class:`Reader` is the read side of an engine, with one implementation per
kind of backend: :class:`~.index_reader.IndexReader` ranks on the in-memory
index (SQLite), :class:`~.pushdown.PushdownReader` asks a store that gates in
its own database (PostgreSQL). What they share is here: a query's arguments
turned into gates (labels into primes, scope names into the visible scopes,
ages into times), a text query's settings, embedding, lending and asking
(fused in :func:`~.fusion.rank_text`), the hits' records, and the counts of
:meth:`Reader.stats`. It writes nothing:
:meth:`~prime_memory_folding.engine.facade.MemoryEngine.query`,
:meth:`~prime_memory_folding.engine.facade.MemoryEngine.match_ids` and
:meth:`~prime_memory_folding.engine.facade.MemoryEngine.stats` delegate to it.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..core import scopes as scope_rules
from ..core import words
from ..core.filters import Filters
from ..core.index import Rows, StructuralIndex, TagQuery
from ..core.primes import Kind
from ..core.records import Hit, Record, Stats
from ..core.scopes import ScopeResolution
from ..core.when import parse_when, time_window
from ..errors import InvalidInput
from ..recall import asking, feedback
from ..recall.fusion import TextQuery
from ..recall.query import RankedRow
from ..recall.query_weights import SharesOf
from ..recall.ranking import DEFAULT_RANKING, RankingSettings
from ..recall.space import SPACE_KEY, check_space, is_custom, store_space
from ..storage import StoredRow, archive
from . import writes
from .live_index import LiveIndex

if TYPE_CHECKING:
    from .parts import EngineParts

__all__ = ["MAX_LIMIT", "MAX_QUERY_CHARS", "MAX_QUERY_WORDS", "Reader", "check_query_text"]

#: The most hits one query may ask for.
MAX_LIMIT = 10_000
#: The longest query text, in characters, and the most distinct words it may
#: hold (:func:`.words.word_set`: in scripts written without spaces, each pair of
#: characters is a word). A text query's time grows with its words: a question
#: or a few key terms rank best anyway (docs/security.md has the measurements).
MAX_QUERY_CHARS = 2_000
MAX_QUERY_WORDS = 100


def check_query_text(text: object) -> str:
    """``text`` when it is a query text within the limits.

    Raises:
        InvalidInput: not a string, blank, holding a NUL, or over
            :data:`MAX_QUERY_CHARS` characters or :data:`MAX_QUERY_WORDS` words.
    """
    if isinstance(text, str) and len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(
            f"text has {len(text):,} characters, over the limit of {MAX_QUERY_CHARS:,}; "
            "ask a question or give a few key terms, not a document"
        )
    checked = words.check_text(text)
    count = len(words.word_set(checked))
    if count > MAX_QUERY_WORDS:
        raise InvalidInput(
            f"text has {count} different words, over the limit of {MAX_QUERY_WORDS}; "
            "ask a question or give a few key terms, not a document"
        )
    return checked


class Reader(ABC):
    """The read side of one engine.

    Args:
        parts: the engine's parts (its lock, storage, registry, clock, text embedder).
        live: the engine's in-memory index (loaded only where the backend needs it).
        scope: the engine's current scope, and what a read sees by default.
        ranking: how text queries rank.
    """

    def __init__(
        self,
        parts: EngineParts,
        live: LiveIndex,
        scope: ScopeResolution,
        ranking: RankingSettings = DEFAULT_RANKING,
    ) -> None:
        #: How text queries rank (:class:`~.ranking.RankingSettings`); the engine sets it.
        self.ranking = ranking
        self._parts = parts
        self._live = live
        self._scope = scope
        self._scope_names: dict[tuple[str, ...], tuple[str, ...] | None] = {}

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the engine's lock for a read, beside other reads, on the read's own
        connection (:meth:`~.storage.base.Storage.reading`).

        What other connections committed is caught up with first, under the lock
        held for writing, only when there is something to catch up with; the check
        is one cheap question to the store. A writer that reads keeps its own
        connection, which sees what its transaction wrote.
        """
        lock = self._parts.lock
        if self._live.stale():
            with lock:
                self._live.refresh()
        with lock.shared():
            if lock.writing():
                yield
            else:
                with self._parts.storage.reading():
                    yield

    def gates(self, filters: Filters) -> TagQuery | None:
        """Labels turned into primes; None when an unknown label means nothing can match.

        Label lookups are memoised per distinct set of labels until the next
        label is added, so a repeated query skips normalising and resolving.
        ``since`` and ``until`` take what :func:`~.when.parse_when` reads.
        """
        f = filters  # checked when it was made: tag counts, strength, scope names
        tags, any_tags, exclude_tags, strength = f.tags, f.any_tags, f.exclude_tags, f.min_strength
        visible = self.visible(f.scopes)
        now = self.query_time(f)
        start = None if f.since is None else parse_when(f.since, now, "since")
        end = None if f.until is None else parse_when(f.until, now, "until")
        labels = self._parts.registry.gates(f.domain, f.subdomain, tags, any_tags, exclude_tags)
        if labels is None or visible == ():
            return None
        if visible is not None:
            labels = replace(labels, scopes=visible)
        if start is not None or end is not None:
            labels = replace(labels, since=start, until=end)
        if strength == 0.0:
            return labels
        # Gate on the strength decayed to now (folding), without writing anything.
        return replace(labels, min_strength=strength, now=now)

    def query_time(self, filters: Filters) -> float:
        """The time a read is asked at: ``filters.now``, else the engine's clock.

        Raises:
            InvalidInput: ``now`` is not a time.
        """
        clock = self._parts.now()
        return clock if filters.now is None else parse_when(filters.now, clock, "now")

    def visible(self, scope_names: Iterable[str] | None) -> tuple[str, ...] | None:
        """The scopes a read sees; None when that is every scope the index holds.

        Raises:
            InvalidInput: a malformed scope name, or a bare string.
        """
        wanted: tuple[str, ...] | None
        if scope_names is None:
            wanted = self._scope.visible
        elif isinstance(scope_names, (list, tuple)) and all(type(s) is str for s in scope_names):
            # Checked names are kept per distinct list, as label gates are.
            key = tuple(scope_names)
            known = self._scope_names.get(key, ())  # (): not kept, or nothing visible
            if known != ():
                wanted = known
            else:
                wanted = scope_rules.normalise_scopes(key)
                if len(self._scope_names) >= 256:
                    self._scope_names.clear()
                self._scope_names[key] = wanted
        else:
            wanted = scope_rules.normalise_scopes(scope_names)
        if not wanted:
            return wanted
        held = self.scope_names()
        if held is not None and len(held) <= len(wanted) and set(held).issubset(wanted):
            return None  # no gate needed: every record is visible
        return wanted

    # -- what each backend answers ------------------------------------------------

    @abstractmethod
    def scope_names(self) -> Sequence[str] | None:
        """Every scope the store holds, when that is known without asking it; else None."""

    @abstractmethod
    def has_vectors(self) -> bool:
        """Whether the store may hold vectors a text query's vector side can score."""

    @abstractmethod
    def shares_of(self, lent: bool) -> SharesOf:
        """Words' shares of the store's records (see :mod:`.query_weights`): for the
        query's own words, or (``lent``) for the words its first hits lend it."""

    @abstractmethod
    def by_salience(self, gates: TagQuery, limit: int, now: float) -> list[Hit]:
        """The gated records best by importance x decayed strength, then recency."""

    @abstractmethod
    def by_vector(
        self, gates: TagQuery, unit: npt.NDArray[np.float32], limit: int, now: float
    ) -> list[Hit]:
        """The gated records nearest ``unit`` (a unit vector) by cosine."""

    @abstractmethod
    def by_text(self, query: TextQuery, gates: TagQuery, limit: int) -> list[Hit]:
        """BM25 and cosine over the gated records, fused (:func:`.fusion.rank_text`)."""

    @abstractmethod
    def lexical_ids(self, text: str, gates: TagQuery, limit: int) -> list[str]:
        """The gated records best by BM25 alone for ``text``, best first: their ids."""

    @abstractmethod
    def gated_window(self, gates: TagQuery) -> tuple[StructuralIndex, Rows]:
        """An index that holds the gated records, and their rows in it."""

    @abstractmethod
    def gated_ids(self, gates: TagQuery) -> list[str]:
        """Every gated record's id, oldest first."""

    @abstractmethod
    def label_counts(self) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        """Live records per domain, subdomain and tag, by prime."""

    @abstractmethod
    def held_scopes(self) -> dict[str, int]:
        """Live records per scope."""

    # -- reads -----------------------------------------------------------------------

    def worded_like(self, text: str, filters: Filters, limit: int) -> list[Record]:
        """The records that pass ``filters`` and share most of ``text``'s words, best
        first by BM25 alone (no vectors, no fusion): cheap candidates for comparing
        texts word by word.

        Raises:
            InvalidInput: ``text`` is not a query text (:func:`check_query_text`).
            NotAvailable: the store cannot rank text.
        """
        checked = check_query_text(text)
        with self.reading():
            gates = self.gates(filters)
            if gates is None or limit == 0:
                return []
            ids = self.lexical_ids(checked, gates, limit)
            found = self._parts.storage.fetch(ids)
        return [found[rid].record for rid in ids if rid in found]

    def hits_of(
        self,
        text: str | None,
        filters: Filters,
        vector: Sequence[float] | None,
        limit: int,
    ) -> list[Hit]:
        """:meth:`.MemoryEngine.query` without a budget: every hit up to ``limit``.

        ``filters`` are the structural gates (:meth:`gates`). A text ranks
        hybrid: structural gates first, then BM25 and cosine over the survivors,
        fused. A caller's vector, when given, stands in for the embedded text on
        the vector side; in a custom space without one, ranking is lexical only.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be a whole number from 0 to {MAX_LIMIT}, got {limit!r}")
        query_vector = None if vector is None else writes.as_vector(vector)
        checked = None if text is None else check_query_text(text)
        with self.reading():
            storage = self._parts.storage
            # A tag query alone needs no space (two reads of the store's settings).
            space = None if checked is None and query_vector is None else store_space(storage)
            if query_vector is not None and space is not None:
                check_space(storage, len(query_vector), claim=False)
            gates = self.gates(filters)
            if gates is None or limit == 0:
                return []
            unit = None
            if query_vector is not None:
                unit = (query_vector / float(np.linalg.norm(query_vector))).astype(np.float32)
            if checked is None:
                now = self.query_time(filters)  # scores show strength decayed to now (folding)
                if unit is not None:
                    return self.by_vector(gates, unit, limit, now)
                return self.by_salience(gates, limit, now)
            settings = self.ranking.for_query(len(words.content_words(checked)))
            named = time_window(checked, self.query_time(filters)) if settings.time_weight else None
            if (
                unit is None
                and self._parts.text.enabled
                and space is not None
                and not is_custom(space)
                and self.has_vectors()
            ):
                unit = self._parts.text.embed_query(checked, self.shares_of(False), settings)
            # What the first hits lend, and which memories only ask: for a hybrid query.
            read: dict[str, str] = {}  # contents this query has read, by record id
            query = TextQuery(
                text=checked,
                unit=unit,
                settings=settings,
                window=None if named is None else (named.start, named.end),
                lender=None if unit is None else self._lender(checked, read, settings),
                asker=None if unit is None else functools.partial(self._asker, read),
            )
            return self.by_text(query, gates, limit)

    def _lender(
        self, text: str, read: dict[str, str], settings: RankingSettings
    ) -> feedback.Lender:
        """What a text query's first hits (by record id) lend it (:mod:`.feedback`)."""
        shares_of = self.shares_of(True)

        def words(record_ids: Sequence[str]) -> list[str]:
            found = self._contents(record_ids, read)
            texts = [found[rid] for rid in record_ids if rid in found]
            return feedback.telling_words(texts, text, shares_of, settings)

        return words

    def _asker(self, read: dict[str, str], record_ids: Sequence[str]) -> list[bool]:
        """Whether each record only asks (:func:`.asking.asks`); False for one gone."""
        found = self._contents(record_ids, read)
        return [asking.asks(found[rid]) if rid in found else False for rid in record_ids]

    def _contents(self, record_ids: Sequence[str], read: dict[str, str]) -> dict[str, str]:
        """The records' contents, by id, those not in ``read`` read and added to it."""
        missing = [rid for rid in dict.fromkeys(record_ids) if rid not in read]
        if missing:
            read.update(self._read_contents(missing))
        return read

    def _read_contents(self, record_ids: list[str]) -> dict[str, str]:
        storage = self._parts.storage
        return archive.contents(storage, record_ids)

    def hits(
        self,
        ranked: Sequence[RankedRow],
        index: StructuralIndex,
        stored: Mapping[str, StoredRow] | None = None,
    ) -> list[Hit]:
        """The hits of ranked rows of ``index``, their records read from the store
        (or taken from ``stored``)."""
        ids = index.record_ids(r.row for r in ranked)
        found = self._parts.storage.fetch(ids) if stored is None else stored
        return [
            Hit(record=found[rid].record, score=r.score, score_parts=r.parts)
            for rid, r in zip(ids, ranked)
            if rid in found
        ]

    def match_ids(self, filters: Filters) -> list[str]:
        """Every record id that passes the structural gates, unranked and unlimited."""
        with self.reading():
            gates = self.gates(filters)
            return [] if gates is None else self.gated_ids(gates)

    def stats(self, scopes: Iterable[str] | None = None) -> Stats:
        """Counts per domain, subdomain and tag, the registries, size, embedding space, archive.

        With ``scopes`` (``["*"]`` is every scope), only what those scopes hold
        is counted: their records, the labels used in them (also in
        ``registries``) and their archive entries.

        Raises:
            InvalidInput: a malformed scope name, or a bare string.
        """
        if scopes is not None:
            names = scope_rules.normalise_scopes(scopes)
            if names is not None:
                return self._scoped_stats(names)
        with self.reading():
            registry = self._parts.registry
            registry.reload()
            storage = self._parts.storage
            archived = archive.count_by_reason(storage)
            domains, subdomains, tags = self.label_counts()
            scope_counts = self.held_scopes()

            def named(kind: Kind, counts: dict[int, int]) -> dict[str, int]:
                labels = registry.labels[kind]
                return dict(sorted((labels[p], n) for p, n in counts.items()))

            return self._stats(
                records=sum(scope_counts.values()),
                domains=named(Kind.DOMAIN, domains),
                subdomains=named(Kind.SUBDOMAIN, subdomains),
                tags=named(Kind.TAG, tags),
                registries={
                    kind.value: dict(sorted(table.items(), key=lambda kv: kv[1]))
                    for kind, table in registry.primes.items()
                },
                archived=archived,
                scope_counts=scope_counts,
                without_vector=self._without_vector(None),
            )

    def scope_counts(self) -> dict[str, int]:
        """Live records per scope, without :meth:`stats`' other counts."""
        with self.reading():
            return dict(sorted(self.held_scopes().items()))

    def _scoped_stats(self, names: tuple[str, ...]) -> Stats:
        """:meth:`stats` of the scopes ``names`` only, counted in the store's tables."""
        counts: dict[Kind, dict[str, int]] = {kind: {} for kind in Kind}
        scope_counts: dict[str, int] = {}
        archived: dict[str, int] = {}
        storage = self._parts.storage
        with self.reading():
            self._parts.registry.reload()
            groups: list[tuple[str, str, str, str, int]] = []
            if names:
                marks = ", ".join("?" for _ in names)
                with storage.read_snapshot():
                    groups = storage.db.execute(
                        "SELECT scope, domain, subdomain, tags, count(*) FROM records "
                        f"WHERE scope IN ({marks}) GROUP BY scope, domain, subdomain, tags",
                        names,
                    ).fetchall()
                    reasons = storage.db.execute(
                        f"SELECT reason, count(*) FROM archive WHERE scope IN ({marks}) "
                        "GROUP BY reason ORDER BY reason",
                        names,
                    ).fetchall()
                archived = {str(reason): int(n) for reason, n in reasons}
            for scope, domain, subdomain, tag_list, n in groups:
                number = int(n)
                scope_counts[scope] = scope_counts.get(scope, 0) + number
                for kind, label in (
                    (Kind.DOMAIN, domain),
                    (Kind.SUBDOMAIN, subdomain),
                    *((Kind.TAG, tag) for tag in json.loads(tag_list)),
                ):
                    counts[kind][label] = counts[kind].get(label, 0) + number
            primes = self._parts.registry.primes
            return self._stats(
                records=sum(scope_counts.values()),
                domains=dict(sorted(counts[Kind.DOMAIN].items())),
                subdomains=dict(sorted(counts[Kind.SUBDOMAIN].items())),
                tags=dict(sorted(counts[Kind.TAG].items())),
                registries={
                    kind.value: dict(
                        sorted(
                            ((label, p) for label, p in table.items() if label in counts[kind]),
                            key=lambda kv: kv[1],
                        )
                    )
                    for kind, table in primes.items()
                },
                archived=archived,
                scope_counts=scope_counts,
                without_vector=self._without_vector(names),
            )

    def _without_vector(self, names: tuple[str, ...] | None) -> int:
        """Live records without a vector, in the scopes ``names`` (None: all)."""
        if names is not None and not names:
            return 0
        storage = self._parts.storage
        sql = "SELECT count(*) FROM records WHERE vector IS NULL"
        if names is not None:
            sql += f" AND scope IN ({', '.join('?' for _ in names)})"
        with storage.read_snapshot():
            row = storage.db.execute(sql, names or ()).fetchone()
        return int(row[0]) if row else 0

    def _stats(
        self,
        *,
        records: int,
        domains: dict[str, int],
        subdomains: dict[str, int],
        tags: dict[str, int],
        registries: dict[str, dict[str, int]],
        archived: dict[str, int],
        scope_counts: Mapping[str, int],
        without_vector: int,
    ) -> Stats:
        storage = self._parts.storage
        return Stats(
            path=storage.path,
            records=records,
            domains=domains,
            subdomains=subdomains,
            tags=tags,
            registries=registries,
            store_bytes=storage.size_bytes(),
            embedding_space=storage.get_meta(SPACE_KEY),
            schema_version=storage.schema_version(),
            archived=sum(archived.values()),
            archived_by_reason=archived,
            scopes=dict(sorted(scope_counts.items())),
            current_scope=self._scope.current,
            scope_reason=self._scope.reason,
            visible_scopes=self._scope.visible,
            without_vector=without_vector,
        )
