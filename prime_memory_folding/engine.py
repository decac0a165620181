"""The facade: one object that stores, finds and maintains memories."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from . import recall, writes
from .address import Encoded, concept_bucket, instance_id, pack, parse_record_id, record_id
from .embeddings import Embedder
from .errors import InvalidInput, NotAvailable, NotFound, StoreError
from .folding import FoldPolicy, FoldReport, decay_columns, decay_terms
from .index import IndexColumns, IndexEntry, StructuralIndex, TagQuery
from .labels import LabelRegistry
from .primes import Kind, next_prime, normalise_label, normalise_tags
from .query import RankedRow, rank_by_salience, rank_by_vector
from .recall import TextEmbedding
from .records import (
    Hit,
    Record,
    Stats,
    StoreResult,
    check_unit_interval,
)
from .storage import IndexRow, IndexTable, SQLiteStorage, Storage, StoredRow, archive

__all__ = ["MAX_LIMIT", "MemoryEngine", "default_store_path"]

#: The most hits one query may ask for.
MAX_LIMIT = 10_000


def default_store_path() -> Path:
    """``$PRIME_MEMORY_HOME/memory.db``, else ``memory.db`` in the per-user data folder."""
    home = os.environ.get("PRIME_MEMORY_HOME")
    if home:
        return Path(home).expanduser() / "memory.db"
    import platformdirs

    return Path(platformdirs.user_data_dir("prime-memory-folding", appauthor=False)) / "memory.db"


class MemoryEngine:
    """A memory store: prime-addressed records on SQLite with an in-memory index.

    Args:
        path: the store file, ``":memory:"`` for a throw-away store, or None for
            :func:`default_store_path`.
        clock: returns the current time in Unix seconds; inject one in tests.
        storage: a ready storage backend, instead of opening ``path``.
        fold_policy: decay half-lives, fold thresholds and auto-fold triggers
            (see :class:`~prime_memory_folding.folding.FoldPolicy`); auto-fold
            is off by default.
        embedder: how content and text queries are embedded: an
            :class:`~prime_memory_folding.embeddings.Embedder`, a spec string (see
            :mod:`~prime_memory_folding.embeddings`), ``"none"`` for no automatic
            embedding, or None for ``PRIME_MEMORY_EMBEDDER`` (the built-in model when
            unset). The model loads only when a text store or query needs it.

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
        clock: Callable[[], float] | None = None,
        storage: Storage | None = None,
        fold_policy: FoldPolicy | None = None,
        embedder: str | Embedder | None = None,
    ) -> None:
        self._clock = clock or time.time
        # -- recall: the text embedder, loaded on first use --
        self._text = TextEmbedding(embedder)
        self._word_shares = recall.WordShares()
        # -- end recall --
        # -- folding state --
        if fold_policy is not None and not isinstance(fold_policy, FoldPolicy):
            raise InvalidInput("fold_policy must be a FoldPolicy")
        self._fold_policy = fold_policy or FoldPolicy()
        self._stores_since_fold = 0
        self._fold_size_mark = 0
        # -- end folding state --
        self._lock = threading.RLock()
        if storage is None:
            storage = SQLiteStorage(default_store_path() if path is None else path)
        self._storage: Storage | None = storage
        self.path = storage.path
        self._index = StructuralIndex()
        self._writes = 0
        self._registry = LabelRegistry(lambda: self.storage.load_primes(), self.path)
        self._load()
        # -- recall: refuse a store embedded by another model --
        try:
            recall.check_open(storage, self._text)
        except BaseException:
            self.close()
            raise
        # -- end recall --

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Close the store. Further calls raise :class:`StoreError`."""
        with self._lock:
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
    def storage(self) -> Storage:
        """The open storage backend.

        Raises:
            StoreError: the engine was closed.
        """
        if self._storage is None:
            raise StoreError(f"the engine for {self.path} is closed; open a new MemoryEngine")
        return self._storage

    # -- index coherence ----------------------------------------------------

    def _load(self) -> None:
        storage = self.storage
        # Read the change position first: anything committed after it is replayed later.
        self._data_version = storage.data_version()
        self._seq = storage.newest_change()
        self._registry.reload()
        self._index.load(self._columns(storage.index_table()))

    def _columns(self, table: IndexTable) -> IndexColumns:
        """The index's columns for every stored record, from the store's columns."""
        primes = {
            kind: {label: self._registry.known(kind, label) for label in set(labels)}
            for kind, labels in ((Kind.DOMAIN, table.domains), (Kind.SUBDOMAIN, table.subdomains))
        }
        since, half = decay_columns(
            self._fold_policy,
            table.importance,
            table.tiers,
            table.created_at,
            table.accessed_at,
            table.access_count,
            table.strength_at,
        )
        vector_rows = [row for row, blob in enumerate(table.vector_blobs) if blob is not None]
        vectors = None
        if vector_rows:
            blobs = [table.vector_blobs[row] for row in vector_rows]
            sizes = {len(blob) for blob in blobs}  # type: ignore[arg-type]
            size = sizes.pop() if len(sizes) == 1 else 0
            if size == 0 or size % 4:
                raise StoreError(
                    f"store {self.path} holds vectors of different or impossible lengths; "
                    "the store is damaged"
                )
            # A bytearray, so that the index can take the matrix over without a copy.
            joined = bytearray().join(blobs)  # type: ignore[arg-type]
            vectors = np.frombuffer(joined, dtype="<f4").reshape(len(blobs), size // 4)
        return IndexColumns(
            record_ids=table.record_ids,
            domain_primes=[primes[Kind.DOMAIN][label] for label in table.domains],
            subdomain_primes=[primes[Kind.SUBDOMAIN][label] for label in table.subdomains],
            tag_primes=[self._registry.tag_primes(tags) for tags in table.tags],
            tag_products=table.tag_products,
            importance=table.importance,
            strength=table.strength,
            updated_at=table.updated_at,
            reinforced_at=since,
            half_life=half,
            vector_rows=vector_rows,
            vectors=vectors,
        )

    def _entry(
        self, rec: IndexRow | Record, tier: object, blob: bytes | None, strength_at: float | None
    ) -> IndexEntry:
        """The index's entry for one stored record."""
        registry = self._registry
        since, half = decay_terms(
            self._fold_policy,
            rec.importance,
            tier,
            rec.created_at,
            rec.accessed_at,
            rec.access_count,
            strength_at,
        )
        return IndexEntry(
            record_id=rec.record_id,
            domain_prime=registry.known(Kind.DOMAIN, rec.domain),
            subdomain_prime=registry.known(Kind.SUBDOMAIN, rec.subdomain),
            tag_primes=registry.tag_primes(rec.tags),
            tag_product=rec.tag_product,
            importance=rec.importance,
            strength=rec.strength,
            updated_at=rec.updated_at,
            vector=None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float32),
            reinforced_at=since,
            half_life=half,
        )

    def _refresh(self) -> None:
        """Catch up with what other connections committed since the last look."""
        storage = self.storage
        version = storage.data_version()
        if version == self._data_version:
            return
        self._data_version = version
        changed, newest, gap = storage.changes_since(self._seq)
        if gap:
            self._load()
            return
        if changed:
            unique = list(dict.fromkeys(changed))
            present = {row.record_id: row for row in storage.index_rows(unique)}
            for rid in unique:
                row = present.get(rid)
                if row is None:
                    self._index.remove(rid)
                else:
                    self._index.upsert(self._entry(row, row.tier, row.vector_blob, row.strength_at))
        self._seq = newest

    def _after_write(self, upserts: Iterable[StoredRow], removed: Iterable[str] = ()) -> None:
        for rid in removed:
            self._index.remove(rid)
        for stored in upserts:
            rec = stored.record
            tier = rec.metadata.get("tier")
            self._index.upsert(self._entry(rec, tier, stored.vector_blob, stored.strength_at))
        if self._index.needs_compaction():
            self._load()

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
    ) -> Record:
        """Store a memory, or reinforce the identical one already stored.

        A memory is identical when it has the same domain, subdomain, tags and
        content (or the same ``instance_key``). Reinforcing raises its strength
        and access count and keeps its id.

        Raises:
            InvalidInput: a bad argument; nothing was written.
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
            }
        )
        with self._lock:
            return writes.write(self, [item])[0]

    def store_many(self, items: Iterable[Mapping[str, Any] | str]) -> list[Record]:
        """Store many memories in one transaction; all or nothing.

        Each item is a mapping with :meth:`store`'s arguments, or a plain string
        of content. Returns the records in input order.

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
                prepared.append(writes.prepare(mapping))
            except InvalidInput as exc:
                raise type(exc)(f"item {position}: {exc}") from None
        with self._lock:
            return [result.record for result in writes.write(self, prepared)]

    # -- reads ----------------------------------------------------------------

    def _gates(
        self,
        domain: str | None,
        subdomain: str | None,
        tags: Iterable[str],
        any_tags: Iterable[str],
        exclude_tags: Iterable[str],
        min_strength: float,
    ) -> TagQuery | None:
        """Labels turned into primes; None when an unknown label means nothing can match.

        Label lookups are memoised per distinct set of labels until the next
        label is added, so a repeated query skips normalising and resolving.
        """
        strength = check_unit_interval("min_strength", min_strength)
        labels = self._registry.gates(domain, subdomain, tags, any_tags, exclude_tags)
        if labels is None or strength == 0.0:
            return labels
        # Gate on the strength decayed to now (folding), without writing anything.
        return replace(labels, min_strength=strength, now=float(self._clock()))

    def query(
        self,
        *,
        text: str | None = None,
        domain: str | None = None,
        subdomain: str | None = None,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        exclude_tags: Iterable[str] = (),
        min_strength: float = 0.0,
        vector: Sequence[float] | None = None,
        limit: int = 10,
    ) -> list[Hit]:
        """Find memories, best first.

        The gates run cheapest first, each only when given: domain and
        subdomain, strength, tags (``tags`` all-of, ``any_tags``, and
        ``exclude_tags`` none-of, by exact prime divisibility), then vector
        similarity. Without a vector, hits are ordered by importance x strength,
        then recency. Unknown labels match nothing.

        Raises:
            InvalidInput: a bad argument.
            NotAvailable: ``text`` was given, and this store cannot rank text.
            EmbeddingError: the text embedder failed; the message names the setting.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be a whole number from 0 to {MAX_LIMIT}, got {limit!r}")
        query_vector = None if vector is None else writes.as_vector(vector)
        # -- recall: text queries rank hybrid (see recall.py) --
        if text is not None:
            return self._text_query(
                recall.check_text(text),
                query_vector,
                (domain, subdomain, tags, any_tags, exclude_tags, min_strength),
                limit,
            )
        # -- end recall --
        with self._lock:
            self._refresh()
            if query_vector is not None and self.storage.get_meta("embedding_space") is not None:
                writes.check_space(self.storage, len(query_vector), claim=False)
            gates = self._gates(domain, subdomain, tags, any_tags, exclude_tags, min_strength)
            if gates is None or limit == 0:
                return []
            now = float(self._clock())  # scores show strength decayed to now (folding)
            ranked: list[RankedRow]
            if query_vector is not None:
                norm = float(np.linalg.norm(query_vector))
                unit = (query_vector / norm).astype(np.float32)
                rows = None if gates == TagQuery() else self._index.select(gates)
                ranked = rank_by_vector(self._index, rows, unit, limit, now=now)
            else:
                ranked = rank_by_salience(self._index, self._index.select(gates), limit, now=now)
            return self._hits(ranked)

    # -- recall: hybrid text queries and re-embedding --------------------------------
    # Parsing, lexical search, fusion and the embedding space live in recall.py.

    def _text_query(
        self,
        text: str,
        query_vector: npt.NDArray[np.float32] | None,
        gate_args: tuple[Any, ...],
        limit: int,
    ) -> list[Hit]:
        """Structural gates first, then BM25 and cosine over the survivors, fused.

        A caller's vector, when given, stands in for the embedded text on the
        vector side; in a custom space without one, ranking is lexical only.
        """
        parsed = recall.parse_query(text)
        with self._lock:
            self._refresh()
            storage = self.storage
            space = recall.store_space(storage)
            if query_vector is not None and space is not None:
                writes.check_space(self.storage, len(query_vector), claim=False)
            gates = self._gates(*gate_args)
            if gates is None or limit == 0:
                return []
            unit = None
            if query_vector is not None:
                unit = (query_vector / float(np.linalg.norm(query_vector))).astype(np.float32)
            elif (
                self._text.enabled
                and space is not None
                and not recall.is_custom(space)
                and self._index.dim is not None
            ):
                unit = self._text.embed([text])[0]
            gate_rows = None if gates == TagQuery() else self._index.select(gates)
            depth: int | None = recall.LEXICAL_DEPTH
            while True:
                found = recall.lexical_scores(
                    storage, parsed, depth, len(self._index), self._word_shares
                )
                lexical = {}
                for rid, score in found.scores.items():
                    row = self._index.row_of(rid)
                    if row is not None:
                        lexical[row] = score
                if gate_rows is not None and lexical:
                    keep = np.isin(np.fromiter(lexical, dtype=np.int64), gate_rows)
                    lexical = {r: v for (r, v), k in zip(lexical.items(), keep) if k}
                # Gates may have dropped most of the best; then look at every match.
                if depth is None or found.exhaustive or len(lexical) >= limit:
                    break
                depth = None
            ranked = recall.hybrid_rank(self._index, gate_rows, lexical, unit, limit)
            return self._hits(ranked)

    def reembed(
        self,
        embedder: str | Embedder | None = None,
        *,
        progress: Callable[[int, int], None] | None = None,
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

        Raises:
            NotAvailable: embedding is turned off, or the store is not SQLite.
            EmbeddingError: the embedder failed; nothing was changed.
        """
        text = self._text if embedder is None else TextEmbedding(embedder)
        if not text.enabled:
            raise NotAvailable("reembed needs an embedder; pass one, not 'none'")
        text.get()
        storage = self.storage
        with self._lock:
            with storage.transaction():
                count = recall.reembed_all(storage, text, progress)
            self._text = text
            self._load()
        return count

    # -- end recall ------------------------------------------------------------------

    def _hits(self, ranked: Sequence[RankedRow]) -> list[Hit]:
        ids = self._index.record_ids(r.row for r in ranked)
        found = self.storage.fetch(ids)
        return [
            Hit(record=found[rid].record, score=r.score, score_parts=r.parts)
            for rid, r in zip(ids, ranked)
            if rid in found
        ]

    def match_ids(
        self,
        *,
        domain: str | None = None,
        subdomain: str | None = None,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        exclude_tags: Iterable[str] = (),
        min_strength: float = 0.0,
    ) -> list[str]:
        """Every record id that passes the structural gates, unranked and unlimited."""
        with self._lock:
            self._refresh()
            gates = self._gates(domain, subdomain, tags, any_tags, exclude_tags, min_strength)
            if gates is None:
                return []
            return self._index.select_ids(gates)

    def get(self, record_id: str) -> Record:
        """The record with this id.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no record has it.
        """
        rid = parse_record_id(record_id)
        with self._lock:
            found = self.storage.fetch([rid]).get(rid)
        if found is None:
            raise NotFound(f"no record {rid} in {self.path}")
        return found.record

    def forget(self, record_id: str) -> Record:
        """Delete a record and return what it held.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no record has it.
        """
        rid = parse_record_id(record_id)
        with self._lock, self.storage.transaction():
            found = self.storage.fetch([rid]).get(rid)
            if found is None:
                raise NotFound(f"no record {rid} in {self.path}")
            self.storage.delete([rid])
        with self._lock:
            self._after_write((), removed=[rid])
        return found.record

    def update(self, record_id: str, **changes: Any) -> Record:
        """Change a record's content, tags, importance, strength, metadata or vector.

        The id and address stay as they were. ``metadata`` replaces the old
        metadata; ``vector=None`` removes the vector.

        Raises:
            InvalidInput: an unknown or bad field, or the change would make the
                record identical to another one.
            NotFound: no record has this id.
        """
        return writes.update(self, record_id, changes)

    def encode(
        self,
        domain: str,
        subdomain: str = "general",
        tags: Iterable[str] = (),
        instance_key: str | None = None,
    ) -> Encoded:
        """The address a record with these labels would get, without storing anything.

        Labels not yet registered get the primes they would be assigned next;
        ``provisional`` is then True, since another writer may claim those first.
        Without an ``instance_key`` the instance lane is 0.
        """
        domain_label = normalise_label(domain, Kind.DOMAIN)
        subdomain_label = normalise_label(subdomain, Kind.SUBDOMAIN)
        tag_labels = normalise_tags(tags)
        if instance_key is not None and (not isinstance(instance_key, str) or not instance_key):
            raise InvalidInput("instance_key must be a non-empty string when given")
        with self._lock:
            self._registry.reload()
            predicted: dict[Kind, int] = {
                kind: max(table.values(), default=1)
                for kind, table in self._registry.primes.items()
            }
            provisional = False

            def prime_for(kind: Kind, label: str) -> int:
                nonlocal provisional
                prime = self._registry.primes[kind].get(label)
                if prime is None:
                    provisional = True
                    predicted[kind] = prime = next_prime(predicted[kind])
                return prime

            domain_prime = prime_for(Kind.DOMAIN, domain_label)
            subdomain_prime = prime_for(Kind.SUBDOMAIN, subdomain_label)
            for tag in tag_labels:
                prime_for(Kind.TAG, tag)
        bucket = concept_bucket(domain_label, subdomain_label, tag_labels)
        instance = 0 if instance_key is None else instance_id(instance_key)
        address = pack(domain_prime, subdomain_prime, bucket, instance)
        return Encoded(
            address=address,
            record_id=record_id(address),
            domain_prime=domain_prime,
            subdomain_prime=subdomain_prime,
            concept_bucket=bucket,
            instance_id=instance,
            provisional=provisional,
        )

    def stats(self) -> Stats:
        """Counts per domain, subdomain and tag, the registries, size, embedding space, archive."""
        with self._lock:
            self._refresh()
            self._registry.reload()
            domains, subdomains, tags = self._index.counts()
            archived = (
                archive.count_by_reason(self.storage)
                if isinstance(self.storage, SQLiteStorage)
                else {}
            )

            def named(kind: Kind, counts: dict[int, int]) -> dict[str, int]:
                labels = self._registry.labels[kind]
                return dict(sorted((labels[p], n) for p, n in counts.items()))

            return Stats(
                path=self.path,
                records=len(self._index),
                domains=named(Kind.DOMAIN, domains),
                subdomains=named(Kind.SUBDOMAIN, subdomains),
                tags=named(Kind.TAG, tags),
                registries={
                    kind.value: dict(sorted(table.items(), key=lambda kv: kv[1]))
                    for kind, table in self._registry.primes.items()
                },
                store_bytes=self.storage.size_bytes(),
                embedding_space=self.storage.get_meta("embedding_space"),
                schema_version=self.storage.schema_version(),
                archived=sum(archived.values()),
                archived_by_reason=archived,
            )

    # -- folding ----------------------------------------------------------------
    # Decay, prune, cluster and merge live in folding.py, the archive's SQL in
    # storage/archive.py, and maintenance.py applies them to this engine.

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

        Raises:
            InvalidInput: ``now`` or ``policy`` is bad.
            NotAvailable: the store is not the embedded SQLite store.
        """
        from . import maintenance

        return maintenance.fold(
            self, dry_run=dry_run, now=now, policy=policy, progress=progress, full=full
        )

    def unfold(self, record_id: str) -> list[Record]:
        """Undo a fold: bring the folded record's members back exactly, and remove it.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live or archived record has this id.
            InvalidInput: the record is not a folded record, is itself archived
                (restore it first), or a member's id or content is live again.
            NotAvailable: the store is not the embedded SQLite store.
        """
        from . import maintenance

        return maintenance.unfold(self, record_id)

    def restore(self, record_id: str) -> Record:
        """Bring one archived record back exactly as it was archived.

        A restored record keeps its old strength, so a record that was pruned
        for decay is pruned again by the next fold unless it is reinforced.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: the archive holds no record with this id.
            InvalidInput: the record is live, or its id or content is live again.
            NotAvailable: the store is not the embedded SQLite store.
        """
        from . import maintenance

        return maintenance.restore(self, record_id)

    def reinforce(self, record_id: str) -> Record:
        """Recall a record: raise its decayed strength and note the reinforcement.

        Strength moves from its decayed value towards 1; a reinforcement that
        comes well after the previous one also lengthens the half-life.

        Raises:
            InvalidRecordId: the id is malformed.
            NotFound: no live record has this id.
        """
        from . import maintenance

        return maintenance.reinforce(self, record_id, writes.REINFORCE_RATE)

    def purge_archive(self, *, before: float | None = None, reason: str | None = None) -> int:
        """Delete archived records for good and reclaim their space; returns how many.

        Args:
            before: only entries archived before this time (Unix seconds).
            reason: only ``"pruned"`` or only ``"folded"`` entries. Purging folded
                members means their folded records can no longer be unfolded.

        Raises:
            InvalidInput: a bad argument.
            NotAvailable: the store is not the embedded SQLite store.
        """
        from . import maintenance

        return maintenance.purge_archive(self, before=before, reason=reason)

    def _maybe_auto_fold(self, stored: int) -> None:
        """Fold when the policy's store count or size budget is reached (off by default).

        The size budget re-arms only once the store grows 10% past its size
        after the last automatic fold, since archiving does not shrink the file.
        """
        policy = self._fold_policy
        if not (policy.auto_fold_every or policy.auto_fold_bytes):
            return
        if not isinstance(self.storage, SQLiteStorage):
            return
        self._stores_since_fold += stored
        due = bool(policy.auto_fold_every) and self._stores_since_fold >= policy.auto_fold_every
        if policy.auto_fold_bytes and not due:
            mark = max(policy.auto_fold_bytes, int(self._fold_size_mark * 1.1))
            due = self.storage.size_bytes() >= mark
        if due:
            report = self.fold()
            self._fold_size_mark = report.bytes_after
