"""The facade: one object that stores, finds and maintains memories."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, TypeVar

from ..core import scopes as scope_rules
from ..core.address import Encoded, parse_record_id
from ..core.filters import Filters
from ..core.filters import resolve as resolve_filters
from ..core.index import Rows, StructuralIndex, TagQuery
from ..core.labels import LabelRegistry
from ..core.places import default_store, default_store_path
from ..core.records import (
    Chain,
    Hit,
    Record,
    Restatement,
    Stats,
    StoreResult,
    Version,
)
from ..core.scopes import ScopeResolution
from ..core.when import When, parse_when
from ..errors import InvalidInput, NotAvailable, NotFound, PrimeMemoryError, StoreError
from ..fold.folding import FoldPolicy, FoldReport
from ..recall import space
from ..recall.embeddings import Embedder
from ..recall.ranking import DEFAULT_RANKING, RankingSettings
from ..recall.text_embedding import TextEmbedding
from ..storage import (
    SqlStorage,
    StoredRow,
    TokenRow,
    archive,
    open_storage,
    pushdown_of,
)
from . import budget, maintenance, survey, tokens, validity, writes
from .cite_check import CitationCheck, CitationReport, CitationState, check_all, check_record
from .index_reader import IndexReader
from .live_index import LiveIndex
from .locking import ReadWriteLock
from .pushdown import PushdownReader
from .reads import MAX_LIMIT, MAX_QUERY_WORDS, Reader
from .store_caches import StoreCaches

__all__ = ["MAX_LIMIT", "MemoryEngine", "default_store", "default_store_path"]

WriteResult = TypeVar("WriteResult")


class _DryRun(Exception):
    """Raised inside :meth:`MemoryEngine.write_verbatim`'s transaction to roll a dry run back."""


logger = logging.getLogger(__name__)

#: Change-log entries kept for other processes to catch up from; a reader that
#: fell further behind reloads everything (docs/architecture.md).
CHANGE_LOG_KEEP = 50_000
#: One engine trims the change log to that after every this many of its writes.
CHANGE_LOG_TRIM_EVERY = 1_000

#: Recalled records wait for one write of their reinforcements until this many
#: are pending, or this many seconds passed since the last write, or the engine closes.
RECALL_FLUSH_RECORDS = 64
RECALL_FLUSH_SECONDS = 30.0
#: The nearest memories of its scope a new one is compared with, for supersession.
SUGGEST_FROM = 5


def _any_stale(hits: Sequence[Hit]) -> bool:
    """Whether a checked hit has a stale citation (its ``citations`` part is below 1)."""
    return any(hit.score_parts.get("citations", 1.0) < 1.0 for hit in hits)


class MemoryEngine:
    """A memory store: prime-addressed records on SQLite with an in-memory index.

    Args:
        path: the store file, ``":memory:"`` for a throw-away store, or None for
            :func:`default_store_path`.
        scope: the current scope, where writes go by default: a scope name, a
            :class:`~prime_memory_folding.core.scopes.ScopeResolution`, or None to
            resolve it from the environment and the working directory (see
            :mod:`~prime_memory_folding.core.scopes`). Reads see the current scope,
            the user's scope and ``global`` unless they name others.
        clock: returns the current time in Unix seconds; inject one in tests.
        storage: a ready storage backend, instead of opening ``path``.
        fold_policy: decay half-lives, fold thresholds and auto-fold triggers
            (see :class:`~prime_memory_folding.fold.folding.FoldPolicy`); auto-fold
            is off by default.
        embedder: how content and text queries are embedded: an
            :class:`~prime_memory_folding.recall.embeddings.Embedder`, a spec string (see
            :mod:`~prime_memory_folding.recall.embeddings`), ``"none"`` for no automatic
            embedding, or None for ``PRIME_MEMORY_EMBEDDER`` (the built-in model when
            unset). The model loads only when a text store or query needs it.
        ranking: how text queries rank
            (:class:`~prime_memory_folding.recall.ranking.RankingSettings`); the defaults
            when None. :attr:`ranking` reads and replaces it.
        check_citations: check the citations of each query's hits against the
            working tree (docs/citations.md); False leaves them unchecked, as
            they were stored.

    Raises:
        EmbeddingError: the store's vectors belong to another embedding space than
            the configured embedder's (see :meth:`reembed`).

    The engine is safe to share between threads, and several processes may
    open the same file at once.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        scope: str | ScopeResolution | None = None,
        clock: Callable[[], float] | None = None,
        storage: SqlStorage | None = None,
        fold_policy: FoldPolicy | None = None,
        embedder: str | Embedder | None = None,
        ranking: RankingSettings | None = None,
        check_citations: bool = True,
    ) -> None:
        if ranking is not None and not isinstance(ranking, RankingSettings):
            raise InvalidInput("ranking must be a RankingSettings")
        self._clock = clock or time.time
        self._scope = scope if isinstance(scope, ScopeResolution) else scope_rules.resolve(scope)
        # -- recall: the text embedder, loaded on first use --
        self._text = TextEmbedding(embedder)
        # -- end recall --
        # -- folding state --
        if fold_policy is not None and not isinstance(fold_policy, FoldPolicy):
            raise InvalidInput("fold_policy must be a FoldPolicy")
        self._fold_policy = fold_policy or FoldPolicy()
        self._stores_since_fold = 0
        self._fold_size_mark = 0
        # -- end folding state --
        self._lock = ReadWriteLock()
        if storage is None:
            storage = open_storage(default_store() if path is None else path)
        elif not isinstance(storage, SqlStorage):  # once, at open: the check is slow
            raise InvalidInput(
                f"storage must be a store that takes SQL, as SQLite's and PostgreSQL's "
                f"do (SqlStorage), not {type(storage).__name__}"
            )
        self._storage: SqlStorage | None = storage
        #: Where the store is: its file, or its URL with any password masked.
        self.path = storage.path
        #: How the engine's messages name the store: :attr:`path` unless a caller
        #: that must not show where the store is (the MCP server) sets another name.
        self.display_path: str = self.path
        # A backend that gates in its own database (PostgreSQL) answers queries
        # there (pushdown.py): the index is then read only for a fold or a survey.
        self._pushdown = pushdown_of(storage)
        self._caches = None if self._pushdown is None else StoreCaches(self._pushdown)
        self._writes = 0
        self._parts = _Parts(self)
        # Recalled records not yet reinforced in the store (see query(reinforce=True)).
        self._recalled: dict[str, int] = {}
        self._recall_written = float(self._clock())
        self._registry = LabelRegistry(lambda: self.storage.load_primes(), self.path)
        self._live = LiveIndex(
            lambda: self.storage,
            self._registry,
            self._fold_policy,
            self._lock,
            self.path,
            pushdown=self._pushdown is not None,
        )
        self._index = self._live.index  # the same object for the engine's life
        self._citations = CitationCheck() if check_citations else None
        self._reader: Reader = (
            IndexReader(self._parts, self._live, self._scope, ranking or DEFAULT_RANKING)
            if self._pushdown is None
            else PushdownReader(self._parts, self._live, self._scope, ranking or DEFAULT_RANKING)
        )
        self._load()
        # -- recall: refuse a store embedded by another model --
        try:
            space.check_open(storage, self._text)
        except BaseException:
            self.close()
            raise
        # -- end recall --

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Write pending reinforcements and close the store; further calls raise StoreError."""
        with self._lock:
            if self._storage is not None and self._recalled:
                try:
                    self.flush_recalls()
                except PrimeMemoryError:
                    logger.warning("reinforcing recalled memories failed on close", exc_info=True)
            if self._storage is not None:
                self._storage.close()
                self._storage = None

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def ranking(self) -> RankingSettings:
        """How text queries rank; assign a new :class:`~.ranking.RankingSettings` to change it."""
        return self._reader.ranking

    @ranking.setter
    def ranking(self, settings: RankingSettings) -> None:
        if not isinstance(settings, RankingSettings):
            raise InvalidInput("ranking must be a RankingSettings")
        self._reader.ranking = settings

    @property
    def storage(self) -> SqlStorage:
        """The open storage backend.

        Raises:
            StoreError: the engine was closed.
        """
        if self._storage is None:
            raise StoreError(
                f"the engine for {self.display_path} is closed; open a new MemoryEngine"
            )
        return self._storage

    def _load(self) -> None:
        """Read the registries and the index again (after an import wrote past them)."""
        self._live.load()

    # -- writes ---------------------------------------------------------------

    def store(
        self,
        content: str,
        *,
        domain: str = "memory",
        subdomain: str = "general",
        tags: Iterable[str] = (),
        importance: float = 0.5,
        vector: Sequence[float] | None = None,
        metadata: Mapping[str, Any] | None = None,
        instance_key: str | None = None,
        scope: str | None = None,
        session: str | None = None,
        cites: Sequence[Mapping[str, Any]] | None = None,
        repo: str | os.PathLike[str] | None = None,
        supersedes: str | None = None,
    ) -> Record:
        """Store a memory, or reinforce the identical one already stored.

        A memory is identical when it has the same scope, domain, subdomain,
        tags and content (or the same ``instance_key``). Reinforcing raises its
        strength and access count and keeps its id. It goes to the current
        scope unless ``scope`` names another (e.g. ``"global"``, or the user
        scope for a personal preference).

        ``session`` names the conversation the memory belongs to (at most 200
        characters; blank is none): memories of one session lend each other
        context in text recall. A reinforced memory keeps the session it was
        first stored in.

        ``cites`` points the memory at code: a list such as
        ``[{"path": "src/client.py", "lines": "70-95"}, {"path": "src/db.py",
        "symbol": "connect"}, {"path": "README.md"}]``, paths relative to the
        root of the git repository ``repo`` is in (by default the current
        scope's project folder's, else the working directory's). A fingerprint
        of each cited part is kept in ``metadata["cites"]``, and each query
        checks it against the working tree (:attr:`Hit.citations`,
        docs/citations.md). The metadata key ``cites`` is reserved for them.

        ``supersedes`` names a live record of the same scope that this memory
        replaces: it is closed (archived with reason ``superseded``, valid until
        now, linked to this one) and queries return this one instead;
        ``query(as_of=...)`` and :meth:`chain` still find it. Whether a memory
        restates an older one with another value, and might supersede it, is
        :meth:`possibly_supersedes`'s to say; nothing is closed by itself.

        Raises:
            InvalidInput: a bad argument, or a citation that names a path
                outside the repository, a missing file, lines past its end or
                malformed, or a symbol not in it; ``supersedes`` names a record
                that is not live, of another scope, the record this store
                writes, or one that would make a cycle; nothing was written.
            NotFound: ``supersedes`` names no record.
            StoreError: the store could not be written.
        """
        return self.store_result(
            content,
            domain=domain,
            subdomain=subdomain,
            tags=tags,
            importance=importance,
            vector=vector,
            metadata=metadata,
            instance_key=instance_key,
            scope=scope,
            session=session,
            cites=cites,
            repo=repo,
            supersedes=supersedes,
        ).record

    def store_result(
        self,
        content: str,
        *,
        domain: str = "memory",
        subdomain: str = "general",
        tags: Iterable[str] = (),
        importance: float = 0.5,
        vector: Sequence[float] | None = None,
        metadata: Mapping[str, Any] | None = None,
        instance_key: str | None = None,
        scope: str | None = None,
        session: str | None = None,
        cites: Sequence[Mapping[str, Any]] | None = None,
        repo: str | os.PathLike[str] | None = None,
        supersedes: str | None = None,
    ) -> StoreResult:
        """Like :meth:`store`, and also tells whether the record is new."""
        item = writes.prepare(
            {
                "content": content,
                "domain": domain,
                "subdomain": subdomain,
                "tags": tags,
                "importance": importance,
                "vector": vector,
                "metadata": metadata,
                "instance_key": instance_key,
                "scope": scope,
                "session": session,
                "cites": cites,
                "repo": repo,
                "supersedes": supersedes,
            },
            self._scope.current,
            self._scope.folder,
        )
        with self._lock:
            result = writes.write(self._parts, [item])[0]
            self._stored(1)
        return result

    def store_many(self, items: Iterable[Mapping[str, Any] | str]) -> list[Record]:
        """Store many memories in one transaction; all or nothing.

        Each item is a mapping with :meth:`store`'s arguments (``scope``,
        ``session``, ``cites`` and ``repo`` included), or a plain string of
        content. Returns the records in input order.

        Raises:
            InvalidInput: an item is bad (its position is named); nothing was written.
        """
        prepared: list[writes.StoreItem] = []
        for position, raw in enumerate(items):
            mapping = {"content": raw} if isinstance(raw, str) else raw
            if not isinstance(mapping, Mapping):
                raise InvalidInput(
                    f"item {position} must be a mapping or a string, got {type(raw).__name__}"
                )
            try:
                prepared.append(writes.prepare(mapping, self._scope.current, self._scope.folder))
            except InvalidInput as exc:
                raise type(exc)(f"item {position}: {exc}") from None
        with self._lock:
            results = writes.write(self._parts, prepared)
            if prepared:
                self._stored(len(prepared))
        return [result.record for result in results]

    # -- reads ----------------------------------------------------------------

    def query(
        self,
        text: str | None = None,
        *,
        domain: str | None = None,
        subdomain: str | None = None,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        exclude_tags: Iterable[str] = (),
        min_strength: float = 0.0,
        vector: Sequence[float] | None = None,
        limit: int = 10,
        scopes: Iterable[str] | None = None,
        max_tokens: int | None = None,
        since: When | None = None,
        until: When | None = None,
        reinforce: bool = False,
        now: When | None = None,
        filters: Filters | None = None,
        as_of: When | None = None,
    ) -> list[Hit]:
        """Find memories, best first: ``query("deploy steps")``, or by gates alone.

        The gates run cheapest first, each only when given: scope, domain and
        subdomain, strength, tags (``tags`` all-of, ``any_tags``, and
        ``exclude_tags`` none-of, by exact prime divisibility), then vector
        similarity. Without a vector, hits are ordered by importance x strength,
        then recency. Unknown labels match nothing.

        ``scopes`` None sees the current scope, the user's and ``global``
        (:meth:`whoami`); a list sees those scopes, ``["*"]`` every scope. An
        unknown scope matches nothing. ``since`` and ``until`` keep records last
        stored or changed in that window: a ``datetime``, Unix seconds, an ISO
        date, or an age such as ``"7d"`` or ``"2 weeks"`` (:mod:`~.when`).

        A ``text`` that names a span of time ("yesterday", "last week", "in
        May", "two years ago", "2023") gives the memories stored in it a soft
        lead, not a gate (``time`` in the score parts; see docs/recall.md).
        Ages and those spans are read against ``now``, the query's time: the
        engine's clock unless given (a ``datetime``, Unix seconds, an ISO date,
        or an age).

        With ``reinforce``, what the query returns counts as recalled: each hit
        is reinforced as storing it again would, in a write shared with other
        queries' (:meth:`flush_recalls`), so a query does not wait for a commit
        of its own. Off by default, so that a library's reads do not write.

        A hit whose memory cites code (``store(cites=...)``) has each citation
        checked against the working tree: ``verified``, ``moved`` or ``stale``
        in :attr:`Hit.citations`; a stale one's score is halved
        (``citations`` in the score parts) and the hits sorted again.

        ``as_of`` (a time, as ``since`` takes it) asks what was valid then:
        each current hit stands for the version of its chain valid at that
        moment (:meth:`chain`): the predecessor a later memory superseded,
        or the version a later update replaced; a memory first stored after
        it is left out. The versions keep their current memory's rank.
        Without ``as_of``, a query returns only current versions.

        With ``max_tokens``, the hits are filled best-first into that many
        tokens (:mod:`~prime_memory_folding.engine.budget`), and the list is a
        :class:`~prime_memory_folding.engine.budget.Hits` that also says
        ``tokens_used`` and how many were ``left_out``. It always holds at least
        one hit when any matched: a first hit over the budget is cut to fit.

        The gates (``domain`` to ``scopes``, ``since``, ``until`` and ``now``)
        may come instead as one :class:`~prime_memory_folding.core.filters.Filters`:
        ``query("deploy", filters=Filters(domain="decision", tags=["ci"]))``.

        Raises:
            InvalidInput: a bad argument, or ``filters`` and a gate keyword both
                given.
            NotAvailable: ``text`` was given, and this store cannot rank text.
            EmbeddingError: the text embedder failed; the message names the setting.
        """
        if max_tokens is not None:
            budget.check_budget(max_tokens)
        gates = resolve_filters(
            filters,
            domain=domain,
            subdomain=subdomain,
            tags=tags,
            any_tags=any_tags,
            exclude_tags=exclude_tags,
            min_strength=min_strength,
            scopes=scopes,
            since=since,
            until=until,
            now=now,
        )
        if as_of is None:
            hits = self._reader.hits_of(text, gates, vector, limit)
        else:
            moment = parse_when(as_of, self._reader.query_time(gates), "as_of")
            wider = min(MAX_LIMIT, limit * 3 + 10)
            current = self._reader.hits_of(text, gates, vector, wider)
            with self._reader.reading():
                hits = validity.versions_at(self.storage, current, moment, limit)
            reinforce = False  # closed versions are history, not recalled
        if self._citations is not None:
            checked = self._citations.apply(hits)
            if as_of is None and len(hits) == limit < MAX_LIMIT and _any_stale(checked):
                # A stale memory ranks lower: the memories just below the limit
                # may now rank above it, so twice as many are looked at.
                more = self._reader.hits_of(text, gates, vector, min(MAX_LIMIT, 2 * limit))
                checked = self._citations.apply(more)[:limit]
            hits = checked
        if max_tokens is not None:
            hits = budget.fit(hits, max_tokens)
        if reinforce and hits:
            self._recall([hit.record.record_id for hit in hits])
        return hits

    def recalled(self, record_ids: Iterable[str]) -> None:
        """Count records as recalled, as ``query(reinforce=True)`` counts its hits.

        For a caller that learns later which memories were used (the MCP
        server's ``prime_memory_reinforce``). They are reinforced in a write
        shared with other recalls (:meth:`flush_recalls`); an id that names no
        live record by then is passed over.

        Raises:
            InvalidRecordId: an id is malformed.
        """
        if isinstance(record_ids, str):
            raise InvalidInput("record_ids must be a list of ids, not one string; wrap it: [id]")
        ids = [parse_record_id(rid) for rid in record_ids]
        if ids:
            self._recall(ids)

    def _recall(self, record_ids: Iterable[str]) -> None:
        with self._lock:
            for rid in record_ids:
                self._recalled[rid] = self._recalled.get(rid, 0) + 1
            waited = float(self._clock()) - self._recall_written
            if len(self._recalled) >= RECALL_FLUSH_RECORDS or waited >= RECALL_FLUSH_SECONDS:
                self.flush_recalls()

    def flush_recalls(self) -> int:
        """Write the reinforcements of recalled memories now, in one transaction.

        :meth:`query` with ``reinforce=True`` gathers them and writes them
        every so often; a crash before that loses them (and nothing else).
        Returns how many records were reinforced.
        """
        with self._lock:
            pending, self._recalled = self._recalled, {}
            self._recall_written = float(self._clock())
            if not pending:
                return 0
            return maintenance.reinforce_many(self._parts, pending, writes.REINFORCE_RATE)

    # -- recall: hybrid text queries and re-embedding --------------------------------
    # Reads rank in reads.py and fusion.py; the embedding space lives in space.py.

    def reembed(
        self,
        embedder: str | Embedder | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
        missing_only: bool = False,
    ) -> int:
        """Embed every record's content again, in one transaction; returns how many.

        This moves a store to another embedding space (or into one, for a store
        of caller vectors or none): every vector, caller-given ones too, is
        replaced. On failure nothing changes. Afterwards the engine embeds with
        ``embedder``.

        Args:
            embedder: the embedder to move to, as for the constructor; None keeps
                the configured one.
            progress: called with (records done, records in all) after each batch.
            missing_only: embed only the records that have no vector, with the
                configured embedder (an import of records that came without
                them); ``embedder`` must then be None.

        Raises:
            NotAvailable: embedding is turned off.
            EmbeddingError: the embedder failed; nothing was changed.
        """
        if missing_only and embedder is not None:
            raise InvalidInput("missing_only embeds with the configured embedder; pass no embedder")
        text = self._text if embedder is None else TextEmbedding(embedder)
        if not text.enabled:
            raise NotAvailable("reembed needs an embedder; pass one, not 'none'")
        text.get()
        storage = self.storage
        with self._lock:
            with storage.transaction():
                count = space.reembed_all(storage, text, progress, missing_only=missing_only)
            self._text = text
            self._load()
        return count

    # -- end recall ------------------------------------------------------------------

    def match_ids(
        self,
        *,
        domain: str | None = None,
        subdomain: str | None = None,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        exclude_tags: Iterable[str] = (),
        min_strength: float = 0.0,
        scopes: Iterable[str] | None = None,
        since: When | None = None,
        until: When | None = None,
        filters: Filters | None = None,
    ) -> list[str]:
        """Every record id that passes the structural gates, unranked and unlimited.

        ``scopes``, ``since``, ``until`` and ``filters`` work as in :meth:`query`.

        Raises:
            InvalidInput: a bad gate, or ``filters`` and a gate keyword both given.
        """
        return self._reader.match_ids(
            resolve_filters(
                filters,
                domain=domain,
                subdomain=subdomain,
                tags=tags,
                any_tags=any_tags,
                exclude_tags=exclude_tags,
                min_strength=min_strength,
                scopes=scopes,
                since=since,
                until=until,
            )
        )

    def get(self, record_id: str) -> Record:
        """The record with this id.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no record has it.
        """
        rid = parse_record_id(record_id)
        with self._reader.reading():
            found = self.storage.fetch([rid]).get(rid)
        if found is None:
            raise NotFound(f"no record {rid} in {self.display_path}")
        return found.record

    def update(self, record_id: str, **changes: Any) -> Record:
        """Change a record's content, tags, importance, strength, metadata, vector or scope.

        The id and address stay as they were, also when the record moves to
        another scope. A change of content, tags, importance or scope keeps the
        version it replaced as history (:meth:`history`). ``metadata`` replaces the old
        metadata, but for its citations: those stay unless ``cites`` gives new
        ones (checked and fingerprinted as :meth:`store` does them, against
        ``repo`` or the current project's repository) or ``[]`` drops them.
        ``vector=None`` removes the vector.

        Raises:
            InvalidInput: an unknown or bad field, or the change would make the
                record identical to another one.
            NotFound: no record has this id.
        """
        return writes.update(self._parts, record_id, changes, self._scope.folder)

    def now(self) -> float:
        """The engine's clock: Unix seconds (the clock it was given, else the system's)."""
        return float(self._clock())

    def write_verbatim(
        self, write: Callable[[SqlStorage], WriteResult], *, dry_run: bool = False
    ) -> WriteResult:
        """``write(storage)`` in one write transaction that no other writer overlaps,
        under the engine's lock, and the index read again after it.

        For writers that put records into the store as they were kept elsewhere
        (ids, addresses, primes and times), as an import of a pack does
        (:mod:`~prime_memory_folding.transfer.packs`), rather than through
        :meth:`store`. With ``dry_run`` the transaction is rolled back and
        nothing changes; ``write``'s result is returned either way.
        """
        storage = self.storage
        with self._lock:
            try:
                with storage.exclusive():
                    result = write(storage)
                    if dry_run:
                        raise _DryRun  # rolls the transaction back
            except _DryRun:
                return result
            self._load()
        return result

    def encode(
        self,
        domain: str,
        subdomain: str = "general",
        tags: Iterable[str] = (),
        instance_key: str | None = None,
        scope: str | None = None,
    ) -> Encoded:
        """The address a record with these labels would get, without storing anything.

        Labels not yet registered get the primes they would be assigned next;
        ``provisional`` is then True, since another writer may claim those first.
        Without an ``instance_key`` the instance lane is 0. The scope (the
        current one when None) enters the concept bucket lane.
        """
        current = self._scope.current if scope is None else scope
        return writes.encode(self._parts, current, domain, subdomain, tags, instance_key)

    def stats(self, scopes: Iterable[str] | None = None) -> Stats:
        """Counts per domain, subdomain and tag, the registries, size, embedding space, archive.

        With ``scopes`` (``["*"]``: every scope), only what those scopes hold is
        counted: their records, the labels used in them (also in ``registries``)
        and their archive entries.

        Raises:
            InvalidInput: a malformed scope name, or a bare string.
        """
        return self._reader.stats(scopes)

    def scope_counts(self) -> dict[str, int]:
        """Live records per scope: ``stats().scopes`` without counting anything else."""
        return self._reader.scope_counts()

    # -- access tokens ----------------------------------------------------------

    def verify_token(self, secret: str) -> TokenRow | None:
        """The live access token whose secret this is, or None (see :mod:`.tokens`)."""
        with self._lock:
            return tokens.verify(self.storage, secret)

    def live_tokens(self) -> list[TokenRow]:
        """The access tokens not revoked, oldest first."""
        with self._lock:
            return tokens.live_tokens(self.storage)

    # -- scopes -----------------------------------------------------------------

    def whoami(self) -> ScopeResolution:
        """The current scope, what a read sees by default, and how the current one was found."""
        return self._scope

    def rescope(self, record_ids: Iterable[str], scope: str) -> list[Record]:
        """Move records to another scope, all or nothing; their ids never change.

        Returns the records that moved; those already in ``scope`` stay as they are.

        Raises:
            InvalidRecordId: an id is malformed.
            InvalidInput: the scope is malformed, or a record would become
                identical to one already in ``scope``; nothing moved.
            NotFound: an id names no live record; nothing moved.
        """
        if isinstance(record_ids, str):
            raise InvalidInput("record_ids must be a list of ids, not one string; wrap it: [id]")
        return writes.rescope(self._parts, list(record_ids), scope)

    def retag(
        self, record_ids: Iterable[str], *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> list[Record]:
        """Add and remove tags on many records, all or nothing; their ids never change.

        Returns the records whose tags changed; those that already had the
        tags asked for stay as they are.

        Raises:
            InvalidRecordId: an id is malformed.
            InvalidInput: no tag named, a bad tag, a tag both added and removed, or
                a record would become identical to another; nothing changed.
            NotFound: an id names no live record; nothing changed.
        """
        if isinstance(record_ids, str):
            raise InvalidInput("record_ids must be a list of ids, not one string; wrap it: [id]")
        if isinstance(add, str) or isinstance(remove, str):
            raise InvalidInput("add and remove must be lists of tags, not one string")
        return writes.retag(self._parts, list(record_ids), list(add), list(remove))

    # -- maintenance ------------------------------------------------------------
    # Decay, prune, cluster and merge live in folding.py, applied to the store
    # by maintenance.py; the archive's SQL is storage/archive.py's.

    @property
    def fold_policy(self) -> FoldPolicy:
        """The policy that decays strength in queries and drives :meth:`fold` by default."""
        return self._fold_policy

    def fold(
        self,
        *,
        dry_run: bool = False,
        now: float | None = None,
        policy: FoldPolicy | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        keep_apart: Iterable[str] = (),
        merge_again: Iterable[str] = (),
        full: bool = False,
    ) -> FoldReport:
        """Decay, prune, cluster and merge: keep the store small and meaningful.

        Pruned records and the members of each folded record move to the
        archive; nothing is destroyed. The fold is one transaction. Other
        processes may keep writing: the plan is re-made under the write lock if
        anything changed since it was made.

        A fold is incremental when it can be: it screens only the records new
        or changed since the last fold (against the whole store) and finds the
        records due for pruning from their stored prune moments, and gives the
        merges a full fold would. It is full the first time, with
        ``full=True``, with a policy whose decay or link rules differ from the
        last fold's, or when much of the store changed.

        Args:
            dry_run: report what a fold would do, and change nothing.
            now: the time to decay to (Unix seconds); the engine's clock if None.
            policy: overrides the engine's fold policy for this fold.
            progress: called as ``progress(step, done, total)`` when each step
                starts (reading records, decaying and pruning, finding
                candidates, checking candidates, writing) and when the fold is done.
            full: read and screen every record, and write back decayed strengths.
            keep_apart: record ids whose groups are left unmerged this time: a
                group that would fold any of them is skipped (a preview's
                ``folded_from`` names each group's members).
            merge_again: record ids that :meth:`unfold` brought back: the
                groups kept apart that hold any of them are forgotten, so this
                fold and later ones may merge their records again. With
                ``dry_run``, the preview shows those merges and nothing is forgotten.

        Every fold keeps apart the records each :meth:`unfold` brought back:
        no two of them are merged again, though each may still merge with
        other records.

        Raises:
            InvalidInput: ``now`` or ``policy`` is bad, or an id of
                ``merge_again`` is kept apart from nothing (nothing changes).
        """
        with self._lock:
            report = maintenance.fold(
                self._parts,
                dry_run=dry_run,
                now=now,
                policy=policy,
                progress=progress,
                keep_apart=keep_apart,
                merge_again=merge_again,
                full=full,
                citations=self._citations,
            )
            if not report.dry_run:
                self._stores_since_fold = 0
                self._wrote()
        return report

    def unfold(self, record_id: str) -> list[Record]:
        """Undo a fold: bring the folded record's members back exactly, and remove it.

        Later folds keep the members apart: no two of them are merged again
        (each may still merge with other records) until
        ``fold(merge_again=[...])`` names one of them.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live or archived record has this id.
            InvalidInput: the record is not a folded record, is itself archived
                (restore it first), or a member's id or content is live again.
        """
        return maintenance.unfold(self._parts, record_id)

    def restore(self, record_id: str) -> Record:
        """Bring one archived record back exactly as it was archived.

        A restored record keeps its old strength, so a record that was pruned
        for decay is pruned again by the next fold unless it is reinforced.
        The versions an update replaced are history (:meth:`history`), not
        archived records: to go back to one, :meth:`update` the record.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: the archive holds no record with this id.
            InvalidInput: the record is live (the message says when only
                versions an update replaced are archived), or its id or
                content is live again.
        """
        return maintenance.restore(self._parts, record_id)

    def archive(self, record_ids: Iterable[str], *, detail: str = "archived by hand") -> int:
        """Move live records to the archive, all or nothing; :meth:`restore` brings each back.

        As with :meth:`forget`, nothing is lost: the records wait in the archive
        (reason ``forgotten``, with ``detail`` saying why) until restored or
        purged. Returns how many moved.

        Raises:
            InvalidRecordId: an id is malformed.
            NotFound: an id names no live record; nothing moved.
            InvalidInput: ``detail`` is empty.
        """
        if isinstance(record_ids, str):
            raise InvalidInput("record_ids must be a list of ids, not one string; wrap it: [id]")
        return maintenance.archive_by_hand(self._parts, list(record_ids), detail)

    def reinforce(self, record_id: str) -> Record:
        """Recall a record: raise its decayed strength and note the reinforcement.

        Strength moves from its decayed value towards 1; a reinforcement that
        comes well after the previous one also lengthens the half-life.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live record has this id.
        """
        return maintenance.reinforce(self._parts, record_id, writes.REINFORCE_RATE)

    def purge_archive(
        self,
        *,
        before: float | None = None,
        reason: str | None = None,
        record_ids: Iterable[str] = (),
    ) -> int:
        """Delete archived records for good and reclaim their space; returns how many.

        Args:
            before: only entries archived before this time (Unix seconds).
            reason: only ``"pruned"``, ``"forgotten"`` or ``"folded"`` entries. Purging folded
                members means their folded records can no longer be unfolded.
            record_ids: only the entries of these records (every archived
                version of each), e.g. a secret stored by mistake, once forgotten.

        Raises:
            InvalidInput: a bad argument, or one of ``record_ids`` is a live
                record (forget it first).
            InvalidRecordId: a malformed id.
        """
        return maintenance.purge_archive(
            self._parts, before=before, reason=reason, record_ids=record_ids
        )

    def forget(self, record_id: str) -> Record:
        """Forget a record: move it to the archive, and return what it held.

        Nothing is lost: :meth:`restore` brings it back, until
        :meth:`purge_archive` deletes it for good.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live record has it.
        """
        rid = parse_record_id(record_id)
        with self._lock:
            found = self.storage.fetch([rid]).get(rid)
            if found is None:
                raise NotFound(f"no record {rid} in {self.display_path}")
            maintenance.archive_by_hand(self._parts, [rid], "forgotten")
        return found.record

    def history(self, record_id: str) -> list[Version]:
        """The versions of a record that updates replaced, oldest first.

        An update that changes the content, tags, importance or scope keeps the
        version it replaced in the archive (reason ``replaced``).

        Raises:
            InvalidRecordId: the id is malformed.
        """
        rid = parse_record_id(record_id)
        with self._lock:
            entries = archive.history(self.storage, rid)
        return [Version(entry.stored.record, entry.archived_at) for entry in entries]

    def citations(self, record_id: str) -> tuple[CitationState, ...]:
        """A memory's citations checked against the working tree now; () when it cites nothing.

        The record may be live or archived (its newest archived version).
        Writes nothing; :meth:`check_citations` notes when memories were verified.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live or archived record has this id.
        """
        return check_record(self._parts, self._citations or CitationCheck(), record_id)

    def check_citations(
        self,
        *,
        scopes: Iterable[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> CitationReport:
        """Check every live memory that cites code, in ``scopes``, against the working tree.

        ``scopes`` is :meth:`query`'s (None: the current scope, the user's and
        ``global``; ``["*"]``: every scope). ``progress(done, total)`` is
        called as memories are checked. Each memory whose every citation is
        verified or moved is noted as verified now (beside the record: no
        history, no change other processes read again), which keeps it from
        expiring (``FoldPolicy.cite_expiry_days``). Stale memories are only
        reported; a fold archives them once they have expired.

        Raises:
            InvalidInput: a malformed scope, or ``progress`` is not callable.
        """
        visible = self._reader.visible(scopes)
        return check_all(self._parts, self._citations or CitationCheck(), visible, progress)

    def possibly_supersedes(self, record_id: str) -> list[Restatement]:
        """Older memories that this one seems to restate with another value: a
        number or version, a name, a yes for a no, a stated switch ("moved from
        X to Y"); at most three, each with what changed (``"15 -> 16"``).

        A suggestion to confirm with ``store(..., supersedes=ID)``, never
        applied by itself: the five live memories of the record's scope that
        share most of its words (BM25), stored no later than it, are compared
        with it word by word (docs/supersession.md). A store that cannot rank
        text suggests nothing.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live record has this id.
        """
        record = self.get(record_id)
        gates = resolve_filters(None, scopes=[record.scope])
        probe = validity.probe(record.content, MAX_QUERY_WORDS)
        try:
            near = self._reader.worded_like(probe, gates, SUGGEST_FROM + 1)
        except NotAvailable:
            return []
        older = [
            other
            for other in near
            if other.record_id != record.record_id and other.created_at <= record.created_at
        ]
        return validity.hints(record.content, older[:SUGGEST_FROM])

    def chain(self, record_id: str) -> Chain:
        """A memory's validity chain: the versions before it and after it.

        Predecessors are the memories it superseded (``store(supersedes=...)``),
        theirs in turn, and the versions its updates replaced, oldest first;
        successors are the memories that superseded it, nearest first. Each
        version says when it was valid, where it is now (``live``,
        ``superseded``, ``replaced``, or the reason it was archived) and what
        changed from the one before. The id may be live or archived.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no record has this id, live or archived.
        """
        rid = parse_record_id(record_id)
        with self._reader.reading():
            return validity.chain(self.storage, rid, self.display_path)

    # -- views for people --------------------------------------------------------
    # Read-only pages for the inspector, drawn by survey.py; none writes anything.

    def browse(
        self,
        *,
        domain: str | None = None,
        subdomain: str | None = None,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        exclude_tags: Iterable[str] = (),
        min_strength: float = 0.0,
        max_strength: float = 1.0,
        updated_after: float | None = None,
        updated_before: float | None = None,
        scopes: Iterable[str] | None = None,
        among: Sequence[str] | None = None,
        order: str = "salience",
        offset: int = 0,
        limit: int = 50,
        filters: Filters | None = None,
    ) -> survey.Page:
        """One page of the records that pass the gates, in a chosen order, and their count.

        The gates are :meth:`query`'s, plus the strength decayed to now at most
        ``max_strength``, and the last update in ``[updated_after, updated_before)``.
        ``among`` keeps only those ids (unknown ones are skipped). ``order`` is
        ``salience`` (importance x strength), ``newest``, ``oldest`` (by last
        update), ``importance``, ``strength``, or ``given`` (``among``'s order).
        Writes nothing.

        ``filters`` gives :meth:`query`'s gates as one value instead of the
        keywords ``domain`` to ``scopes``; its ``since``, ``until`` and ``now``
        apply too (strength then decays to ``now``).

        Raises:
            InvalidInput: a bad argument, or ``filters`` and a gate keyword both
                given.
        """
        return survey.browse(
            self._parts,
            resolve_filters(
                filters,
                domain=domain,
                subdomain=subdomain,
                tags=tags,
                any_tags=any_tags,
                exclude_tags=exclude_tags,
                min_strength=min_strength,
                scopes=scopes,
            ),
            max_strength=max_strength,
            updated_after=updated_after,
            updated_before=updated_before,
            among=among,
            order=order,
            offset=offset,
            limit=limit,
        )

    def decay(self, record_id: str) -> survey.Decay:
        """A live record's tier, half-life and strength now, to draw its decay.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live record has it.
        """
        return survey.decay(self._parts, record_id)

    def archive_entries(
        self,
        *,
        reason: str | None = None,
        contains: str | None = None,
        record_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> survey.ArchiveListing:
        """Archived records, newest first, with why and when they left, and their count.

        Args:
            reason: only ``"pruned"``, ``"forgotten"`` or ``"folded"`` entries.
            contains: only records whose content holds this text (any case).
            record_id: only this record's entries and those of the members
                folded into it.

        Raises:
            InvalidInput: a bad argument.
        """
        return survey.archive_entries(
            self._parts,
            reason=reason,
            contains=contains,
            record_id=record_id,
            limit=limit,
            offset=offset,
        )

    def profile(self) -> survey.Profile:
        """Every live record's id, creation time, access count and strength now.

        Raises:
        """
        return survey.profile(self._parts)

    def _stored(self, count: int) -> None:
        """After a committed store of ``count`` memories: count the write, and fold if due."""
        self._wrote()
        self._maybe_auto_fold(count)

    def _wrote(self) -> None:
        """Count one committed write; every 1,000th trims the change log of what no reader needs."""
        self._writes += 1
        if self._writes % CHANGE_LOG_TRIM_EVERY == 0:
            storage = self.storage
            with storage.transaction():
                storage.trim_changes(CHANGE_LOG_KEEP)

    def _maybe_auto_fold(self, stored: int) -> None:
        """Fold when the policy's store count or size budget is reached (off by default).

        The size budget re-arms only once the store grows 10% past its size
        after the last automatic fold, since archiving does not shrink the file.
        """
        policy = self._fold_policy
        if not (policy.auto_fold_every or policy.auto_fold_bytes):
            return
        self._stores_since_fold += stored
        due = bool(policy.auto_fold_every) and self._stores_since_fold >= policy.auto_fold_every
        if policy.auto_fold_bytes and not due:
            mark = max(policy.auto_fold_bytes, int(self._fold_size_mark * 1.1))
            due = self.storage.size_bytes() >= mark
        if due:
            report = self.fold()
            self._fold_size_mark = report.bytes_after


class _Parts:
    """The engine's parts, lent to the write path and to maintenance.

    It implements :class:`~prime_memory_folding.engine.parts.EngineParts`, so that
    ``writes.py`` and ``maintenance.py`` see only what they need, and never
    import the facade that calls them.
    """

    __slots__ = ("_engine",)

    def __init__(self, engine: MemoryEngine) -> None:
        self._engine = engine

    @property
    def path(self) -> str:
        """How messages name the store (the engine's ``display_path``)."""
        return self._engine.display_path

    @property
    def storage(self) -> SqlStorage:
        return self._engine.storage

    @property
    def lock(self) -> ReadWriteLock:
        return self._engine._lock

    @property
    def registry(self) -> LabelRegistry:
        return self._engine._registry

    @property
    def text(self) -> TextEmbedding:
        return self._engine._text

    @property
    def index(self) -> StructuralIndex:
        return self._engine._live.full()

    @property
    def held_index(self) -> StructuralIndex | None:
        return self._engine._live.held

    @property
    def caches(self) -> StoreCaches | None:
        return self._engine._caches

    @property
    def fold_policy(self) -> FoldPolicy:
        return self._engine._fold_policy

    def now(self) -> float:
        return float(self._engine._clock())

    def refresh(self) -> None:
        self._engine._live.refresh()

    def reading(self) -> AbstractContextManager[None]:
        return self._engine._reader.reading()

    def gated(self, gates: TagQuery) -> tuple[StructuralIndex, Rows]:
        return self._engine._reader.gated_window(gates)

    def gates(self, filters: Filters) -> TagQuery | None:
        return self._engine._reader.gates(filters)

    def after_write(self, upserts: Iterable[StoredRow], removed: Iterable[str] = ()) -> None:
        self._engine._live.after_write(upserts, removed)

    def caught_up(self, seq: int) -> None:
        self._engine._live.caught_up(seq)
