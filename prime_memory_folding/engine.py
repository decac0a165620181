"""The facade: one object that stores, finds and maintains memories."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from . import recall
from .address import Encoded, concept_bucket, instance_id, pack, parse_record_id, record_id
from .embeddings import Embedder
from .errors import DimensionMismatch, InvalidInput, NotAvailable, NotFound, StoreError
from .folding import FoldPolicy, FoldReport, decay_columns, decay_terms
from .index import IndexColumns, IndexEntry, StructuralIndex, TagQuery
from .primes import Kind, next_prime, normalise_label, normalise_tags, prime_product
from .query import RankedRow, rank_by_salience, rank_by_vector
from .recall import TextEmbedding
from .records import (
    Hit,
    Record,
    Stats,
    StoreResult,
    Vector,
    check_content,
    check_metadata,
    check_unit_interval,
    check_vector,
)
from .storage import IndexRow, IndexTable, SQLiteStorage, Storage, StoredRow, archive

__all__ = ["MAX_LIMIT", "MemoryEngine", "default_store_path"]

#: The most hits one query may ask for.
MAX_LIMIT = 10_000
#: How far a repeated store moves strength towards 1.
REINFORCE_RATE = 0.5
#: Change-log entries kept for other processes to catch up from.
CHANGE_LOG_KEEP = 50_000

_STORE_FIELDS = frozenset(
    {"content", "domain", "subdomain", "tags", "importance", "vector", "metadata", "instance_key"}
)
#: Distinct label gates remembered before the memo starts afresh.
_GATE_CACHE_SIZE = 1024


def _as_tuple(labels: object) -> tuple[object, ...] | None:
    """A tuple or list of labels as a tuple (a memo key part); None for anything else."""
    if type(labels) is tuple:
        return labels
    if type(labels) is list:
        return tuple(labels)
    return None


_UPDATABLE = frozenset({"content", "tags", "importance", "strength", "metadata", "vector"})


def default_store_path() -> Path:
    """``$PRIME_MEMORY_HOME/memory.db``, else ``memory.db`` in the per-user data folder."""
    home = os.environ.get("PRIME_MEMORY_HOME")
    if home:
        return Path(home).expanduser() / "memory.db"
    import platformdirs

    return Path(platformdirs.user_data_dir("prime-memory-folding", appauthor=False)) / "memory.db"


@dataclass(frozen=True, slots=True)
class _Item:
    """A validated store request."""

    content: str
    domain: str
    subdomain: str
    tags: tuple[str, ...]
    importance: float
    vector: npt.NDArray[np.float32] | None
    metadata: dict[str, Any]
    instance_key: str | None

    @property
    def dedupe_key(self) -> str:
        identity = (
            f"k:{self.instance_key}" if self.instance_key is not None else f"c:{self.content}"
        )
        text = "\x1f".join((self.domain, self.subdomain, *self.tags, identity))
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def _vector_blob(vector: npt.NDArray[np.float32] | None) -> bytes | None:
    return None if vector is None else vector.astype("<f4").tobytes()


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
        # A label's prime never changes, so tag-set lookups can be cached for good.
        self._tag_prime_cache: dict[tuple[str, ...], tuple[int, ...]] = {}
        # Label gates already turned into primes; cleared whenever a label is added.
        self._gate_cache: dict[tuple[object, ...], TagQuery | None] = {}
        self._writes = 0
        self._primes: dict[Kind, dict[str, int]] = {}
        self._labels: dict[Kind, dict[int, str]] = {}
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
        self._set_primes(storage.load_primes())
        self._index.load(self._columns(storage.index_table()))

    def _set_primes(self, primes: dict[Kind, dict[str, int]]) -> None:
        self._primes = primes
        self._gate_cache = {}
        self._labels = {
            kind: {p: label for label, p in table.items()} for kind, table in primes.items()
        }

    def _prime(self, kind: Kind, label: str) -> int | None:
        """A label's prime, or None if it has none. Never assigns."""
        prime = self._primes[kind].get(label)
        if prime is None:
            self._set_primes(self.storage.load_primes())
            prime = self._primes[kind].get(label)
        return prime

    def _known_prime(self, kind: Kind, label: str) -> int:
        """A stored record's label's prime; a label without one means a damaged store."""
        prime = self._prime(kind, label)
        if prime is None:
            raise StoreError(
                f"store {self.path} has a record labelled {label!r} that no "
                f"{kind.value} registry entry explains; the store is damaged"
            )
        return prime

    def _tag_primes(self, tags: tuple[str, ...]) -> tuple[int, ...]:
        primes = self._tag_prime_cache.get(tags)
        if primes is None:
            registry = self._primes[Kind.TAG]
            try:
                primes = tuple([registry[tag] for tag in tags])
            except KeyError:
                primes = tuple(self._known_prime(Kind.TAG, tag) for tag in tags)
            self._tag_prime_cache[tags] = primes
        return primes

    def _columns(self, table: IndexTable) -> IndexColumns:
        """The index's columns for every stored record, from the store's columns."""
        primes = {
            kind: {label: self._known_prime(kind, label) for label in set(labels)}
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
            tag_primes=[self._tag_primes(tags) for tags in table.tags],
            tag_products=table.tag_products,
            importance=table.importance,
            strength=table.strength,
            updated_at=table.updated_at,
            reinforced_at=since,
            half_life=half,
            vector_rows=vector_rows,
            vectors=vectors,
        )

    def _entry(self, row: IndexRow) -> IndexEntry:
        known = self._known_prime
        tag_primes = self._tag_primes(row.tags)
        vector = None
        if row.vector_blob is not None:
            vector = np.frombuffer(row.vector_blob, dtype="<f4").astype(np.float32)
        return IndexEntry(
            record_id=row.record_id,
            domain_prime=known(Kind.DOMAIN, row.domain),
            subdomain_prime=known(Kind.SUBDOMAIN, row.subdomain),
            tag_primes=tag_primes,
            tag_product=row.tag_product,
            importance=row.importance,
            strength=row.strength,
            updated_at=row.updated_at,
            vector=vector,
            **self._decay_fields(
                row.importance,
                row.tier,
                row.created_at,
                row.accessed_at,
                row.access_count,
                row.strength_at,
            ),
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
                    self._index.upsert(self._entry(row))
        self._seq = newest

    def _after_write(self, upserts: Iterable[StoredRow], removed: Iterable[str] = ()) -> None:
        for rid in removed:
            self._index.remove(rid)
        for stored in upserts:
            rec = stored.record
            self._index.upsert(
                IndexEntry(
                    record_id=rec.record_id,
                    domain_prime=self._primes[Kind.DOMAIN][rec.domain],
                    subdomain_prime=self._primes[Kind.SUBDOMAIN][rec.subdomain],
                    tag_primes=tuple(self._primes[Kind.TAG][t] for t in rec.tags),
                    tag_product=rec.tag_product,
                    importance=rec.importance,
                    strength=rec.strength,
                    updated_at=rec.updated_at,
                    vector=None
                    if stored.vector_blob is None
                    else np.frombuffer(stored.vector_blob, dtype="<f4").astype(np.float32),
                    **self._decay_fields(
                        rec.importance,
                        rec.metadata.get("tier"),
                        rec.created_at,
                        rec.accessed_at,
                        rec.access_count,
                        stored.strength_at,
                    ),
                )
            )
        if self._index.needs_compaction():
            self._load()

    def _decay_fields(
        self,
        importance: float,
        tier: object,
        created_at: float,
        accessed_at: float,
        access_count: int,
        strength_at: float | None,
    ) -> dict[str, float]:
        since, half = decay_terms(
            self._fold_policy, importance, tier, created_at, accessed_at, access_count, strength_at
        )
        return {"reinforced_at": since, "half_life": half}

    # -- validation -----------------------------------------------------------

    def _item(self, raw: Mapping[str, Any]) -> _Item:
        unknown = set(raw) - _STORE_FIELDS
        if unknown:
            raise InvalidInput(
                f"unknown field(s) {sorted(unknown)}; a memory takes {sorted(_STORE_FIELDS)}"
            )
        if "content" not in raw:
            raise InvalidInput("content is missing; give the text to remember")
        metadata, _ = check_metadata(raw.get("metadata"))
        key = raw.get("instance_key")
        if key is not None and (not isinstance(key, str) or not key.strip()):
            raise InvalidInput("instance_key must be a non-empty string when given")
        vector = raw.get("vector")
        return _Item(
            content=check_content(raw["content"]),
            domain=normalise_label(raw.get("domain", "memory"), Kind.DOMAIN),
            subdomain=normalise_label(raw.get("subdomain", "general"), Kind.SUBDOMAIN),
            tags=normalise_tags(raw.get("tags", ())),
            importance=check_unit_interval("importance", raw.get("importance", 0.5)),
            vector=None if vector is None else self._vector(vector),
            metadata=metadata,
            instance_key=key,
        )

    def _vector(self, vector: object) -> npt.NDArray[np.float32]:
        values = np.asarray(check_vector(vector), dtype=np.float64)
        if np.abs(values).max() > np.finfo(np.float32).max:
            raise InvalidInput("vector has values too large for float32; scale it down")
        array = values.astype(np.float32)
        if not np.any(array):
            raise InvalidInput("vector is all zeros and has no direction; give a non-zero vector")
        return array

    def _check_space(self, dim: int, *, claim: bool) -> None:
        """Check a vector dimension against the store's embedding space.

        With ``claim``, an empty space is set to ``custom:<dim>``; call it inside
        the write transaction.
        """
        storage = self.storage
        space = storage.get_meta("embedding_space")
        if space is None:
            if claim:
                storage.set_meta("embedding_space", f"custom:{dim}")
                storage.set_meta("embedding_dim", str(dim))
            return
        expected = int(storage.get_meta("embedding_dim") or 0)
        if dim != expected:
            raise DimensionMismatch(
                f"vector has dimension {dim}, but this store's embedding space {space} "
                f"uses dimension {expected}; give {expected}-dimensional vectors"
            )

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
        item = self._item(
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
            return self._write([item])[0]

    def store_many(self, items: Iterable[Mapping[str, Any] | str]) -> list[Record]:
        """Store many memories in one transaction; all or nothing.

        Each item is a mapping with :meth:`store`'s arguments, or a plain string
        of content. Returns the records in input order.

        Raises:
            InvalidInput: an item is bad (its position is named); nothing was written.
        """
        prepared: list[_Item] = []
        for position, raw in enumerate(items):
            mapping = {"content": raw} if isinstance(raw, str) else raw
            if not isinstance(mapping, Mapping):
                raise InvalidInput(
                    f"item {position} must be a mapping or a string, got {type(raw).__name__}"
                )
            try:
                prepared.append(self._item(mapping))
            except InvalidInput as exc:
                raise type(exc)(f"item {position}: {exc}") from None
        with self._lock:
            return [result.record for result in self._write(prepared)]

    def _write(self, items: Sequence[_Item]) -> list[StoreResult]:
        if not items:
            return []
        storage = self.storage
        now = float(self._clock())
        dims = {len(item.vector) for item in items if item.vector is not None}
        # -- recall: load the embedder before taking the write lock --
        if (
            self._text.enabled
            and not self._text.loaded
            and any(item.vector is None for item in items)
            and not recall.is_custom(recall.store_space(storage))
        ):
            self._text.get()
        # -- end recall --
        with storage.transaction():
            if len(dims) > 1:
                raise DimensionMismatch(
                    f"vectors in one batch have different dimensions {sorted(dims)}"
                )
            # -- recall: embed the contents that came without a vector --
            if any(item.vector is None for item in items):
                text = recall.texts_to_embed(storage, self._text, dims)
                if text is not None:
                    bare = [i for i, item in enumerate(items) if item.vector is None]
                    vectors = text.embed([items[i].content for i in bare])
                    embedded = list(items)
                    for i, vec in zip(bare, vectors):
                        embedded[i] = replace(items[i], vector=vec)
                    items = embedded
            # -- end recall --
            for dim in dims:
                self._check_space(dim, claim=True)
            primes = self._assign_all(items)
            keys = [item.dedupe_key for item in items]
            known = storage.find_dedupe(list(dict.fromkeys(keys)))
            first_new: dict[str, _Item] = {}
            for item, key in zip(items, keys):
                if key not in known and key not in first_new:
                    first_new[key] = item
            addresses = self._allocate(list(first_new.items()), primes)
            rows: dict[str, StoredRow] = {
                key: self._new_row(item, key, address, primes, now)
                for (key, item), address in zip(first_new.items(), addresses)
            }
            created: list[bool] = []
            inserted: set[str] = set()
            for item, key in zip(items, keys):
                if key in first_new and key not in inserted:
                    inserted.add(key)
                    created.append(True)
                    continue
                rows[key] = self._reinforce(rows.get(key) or known[key], item, now)
                created.append(False)
            storage.insert(rows[key] for key in first_new)
            if len(rows) > len(first_new):
                storage.replace(row for key, row in rows.items() if key not in first_new)
            self._trim_changes()
        self._set_primes_after_commit(primes)
        self._after_write(rows.values())
        self._maybe_auto_fold(len(items))  # folding: off unless the policy asks
        return [StoreResult(rows[key].record, flag) for key, flag in zip(keys, created)]

    def _assign_all(self, items: Sequence[_Item]) -> dict[Kind, dict[str, int]]:
        """Primes for every label in ``items``, assigning new ones (inside the transaction)."""
        wanted: dict[Kind, dict[str, None]] = {kind: {} for kind in Kind}
        for item in items:
            wanted[Kind.DOMAIN][item.domain] = None
            wanted[Kind.SUBDOMAIN][item.subdomain] = None
            for tag in item.tags:
                wanted[Kind.TAG][tag] = None
        assigned: dict[Kind, dict[str, int]] = {kind: {} for kind in Kind}
        for kind, labels in wanted.items():
            for label in labels:
                prime = self._primes[kind].get(label)
                assigned[kind][label] = (
                    prime if prime is not None else self.storage.assign_prime(kind, label)
                )
        return assigned

    def _set_primes_after_commit(self, assigned: dict[Kind, dict[str, int]]) -> None:
        for kind, table in assigned.items():
            for label, prime in table.items():
                if label not in self._primes[kind]:
                    self._primes[kind][label] = prime
                    self._labels[kind][prime] = label
                    self._gate_cache = {}

    def _allocate(
        self, planned: Sequence[tuple[str, _Item]], primes: dict[Kind, dict[str, int]]
    ) -> list[int]:
        """Addresses for new records.

        An instance lane already taken by a different record moves to the next
        stable alternative, so a collision never overwrites anything.
        """
        firsts: list[tuple[tuple[int, int, int], str, int]] = []
        for _, item in planned:
            bucket = concept_bucket(item.domain, item.subdomain, item.tags)
            base = (
                primes[Kind.DOMAIN][item.domain],
                primes[Kind.SUBDOMAIN][item.subdomain],
                bucket,
            )
            identity = item.instance_key if item.instance_key is not None else item.content
            firsts.append((base, identity, pack(*base, instance_id(identity))))
        taken = self.storage.existing_ids([record_id(address) for _, _, address in firsts])
        used: set[str] = set()
        chosen: list[int] = []
        for base, identity, address in firsts:
            attempt = 0
            while True:
                rid = record_id(address)
                if (
                    rid not in used
                    and rid not in taken
                    and (attempt == 0 or not self.storage.existing_ids([rid]))
                ):
                    break
                attempt += 1
                address = pack(*base, instance_id(identity, attempt))
            used.add(rid)
            chosen.append(address)
        return chosen

    def _new_row(
        self,
        item: _Item,
        key: str,
        address: int,
        primes: dict[Kind, dict[str, int]],
        now: float,
    ) -> StoredRow:
        record = Record(
            record_id=record_id(address),
            address=address,
            domain=item.domain,
            subdomain=item.subdomain,
            tags=item.tags,
            tag_product=prime_product(primes[Kind.TAG][t] for t in item.tags),
            content=item.content,
            importance=item.importance,
            strength=1.0,
            created_at=now,
            updated_at=now,
            accessed_at=now,
            access_count=0,
            metadata=item.metadata,
            vector=None if item.vector is None else Vector(item.vector),
        )
        return StoredRow(
            record=record,
            dedupe_key=key,
            vector_blob=_vector_blob(item.vector),
            instance_key=item.instance_key,
        )

    @staticmethod
    def _reinforce(current: StoredRow, item: _Item, now: float) -> StoredRow:
        rec = current.record
        blob = current.vector_blob
        vector = rec.vector
        if item.vector is not None:
            blob = _vector_blob(item.vector)
            vector = Vector(item.vector)
        record = replace(
            rec,
            content=item.content,
            importance=max(rec.importance, item.importance),
            strength=min(1.0, rec.strength + (1.0 - rec.strength) * REINFORCE_RATE),
            updated_at=now,
            accessed_at=now,
            access_count=rec.access_count + 1,
            metadata={**rec.metadata, **item.metadata},
            vector=vector,
        )
        return replace(current, record=record, vector_blob=blob)

    def _trim_changes(self) -> None:
        """Now and then, drop change-log entries too old for any reader to need."""
        self._writes += 1
        if self._writes % 1000 == 0:
            self.storage.trim_changes(CHANGE_LOG_KEEP)

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
        frozen = (_as_tuple(tags), _as_tuple(any_tags), _as_tuple(exclude_tags))
        labels: TagQuery | None
        if None in frozen:  # a set, a generator or a bad value: resolve it uncached
            labels = self._label_gates(domain, subdomain, tags, any_tags, exclude_tags)
        else:
            key = (domain, subdomain, *frozen)
            try:
                labels = self._gate_cache[key]
            except KeyError:
                labels = self._label_gates(domain, subdomain, tags, any_tags, exclude_tags)
                if len(self._gate_cache) >= _GATE_CACHE_SIZE:
                    self._gate_cache.clear()
                self._gate_cache[key] = labels
            except TypeError:  # an unhashable label: validation names it
                labels = self._label_gates(domain, subdomain, tags, any_tags, exclude_tags)
        if labels is None or strength == 0.0:
            return labels
        # Gate on the strength decayed to now (folding), without writing anything.
        return replace(labels, min_strength=strength, now=float(self._clock()))

    def _label_gates(
        self,
        domain: str | None,
        subdomain: str | None,
        tags: Iterable[str],
        any_tags: Iterable[str],
        exclude_tags: Iterable[str],
    ) -> TagQuery | None:
        domain_prime = subdomain_prime = None
        if domain is not None:
            domain_prime = self._prime(Kind.DOMAIN, normalise_label(domain, Kind.DOMAIN))
            if domain_prime is None:
                return None
        if subdomain is not None:
            subdomain_prime = self._prime(
                Kind.SUBDOMAIN, normalise_label(subdomain, Kind.SUBDOMAIN)
            )
            if subdomain_prime is None:
                return None
        required = [self._prime(Kind.TAG, t) for t in normalise_tags(tags)]
        if any(p is None for p in required):
            return None
        wanted_labels = normalise_tags(any_tags)
        wanted = [p for p in (self._prime(Kind.TAG, t) for t in wanted_labels) if p is not None]
        if wanted_labels and not wanted:
            return None
        excluded = [
            p for p in (self._prime(Kind.TAG, t) for t in normalise_tags(exclude_tags)) if p
        ]
        return TagQuery(
            domain_prime=domain_prime,
            subdomain_prime=subdomain_prime,
            all_of=tuple(p for p in required if p is not None),
            any_of=tuple(wanted),
            none_of=tuple(excluded),
        )

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
        query_vector = None if vector is None else self._vector(vector)
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
                self._check_space(len(query_vector), claim=False)
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
                self._check_space(len(query_vector), claim=False)
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
        rid = parse_record_id(record_id)
        unknown = set(changes) - _UPDATABLE
        if unknown:
            hint = ""
            if unknown & {"domain", "subdomain"}:
                hint = "; the domain and subdomain are part of the address, so store a new record"
            raise InvalidInput(
                f"cannot update {sorted(unknown)}; updatable fields are {sorted(_UPDATABLE)}{hint}"
            )
        content = check_content(changes["content"]) if "content" in changes else None
        tags = normalise_tags(changes["tags"]) if "tags" in changes else None
        importance = (
            check_unit_interval("importance", changes["importance"])
            if "importance" in changes
            else None
        )
        strength = (
            check_unit_interval("strength", changes["strength"]) if "strength" in changes else None
        )
        metadata = check_metadata(changes["metadata"])[0] if "metadata" in changes else None
        new_vector = None
        if changes.get("vector") is not None:
            new_vector = self._vector(changes["vector"])
        storage = self.storage
        with self._lock:
            with storage.transaction():
                current = storage.fetch([rid]).get(rid)
                if current is None:
                    raise NotFound(f"no record {rid} in {self.path}")
                rec = current.record
                if new_vector is not None:
                    self._check_space(len(new_vector), claim=True)
                assigned = (
                    {kind: {} for kind in Kind}
                    if tags is None
                    else self._assign_all(
                        [_Item("x", rec.domain, rec.subdomain, tags, 0.5, None, {}, None)]
                    )
                )
                new_tags = rec.tags if tags is None else tags
                item = _Item(
                    content=rec.content if content is None else content,
                    domain=rec.domain,
                    subdomain=rec.subdomain,
                    tags=new_tags,
                    importance=rec.importance,
                    vector=None,
                    metadata={},
                    instance_key=current.instance_key,
                )
                key = current.dedupe_key
                if content is not None or tags is not None:
                    key = item.dedupe_key
                    clash = storage.find_dedupe([key]).get(key)
                    if clash is not None and clash.record.record_id != rid:
                        raise InvalidInput(
                            f"record {clash.record.record_id} already holds this content with "
                            "these labels; forget one of them instead"
                        )
                tag_table = {**self._primes[Kind.TAG], **assigned[Kind.TAG]}
                vector_blob = current.vector_blob
                vector = rec.vector
                if "vector" in changes:
                    vector_blob = _vector_blob(new_vector)
                    vector = None if new_vector is None else Vector(new_vector)
                record = replace(
                    rec,
                    content=item.content,
                    tags=new_tags,
                    tag_product=prime_product(tag_table[t] for t in new_tags),
                    importance=rec.importance if importance is None else importance,
                    strength=rec.strength if strength is None else strength,
                    metadata=rec.metadata if metadata is None else metadata,
                    updated_at=float(self._clock()),
                    vector=vector,
                )
                row = replace(
                    current,
                    record=record,
                    dedupe_key=key,
                    vector_blob=vector_blob,
                    # A strength set now decays from now (folding).
                    strength_at=current.strength_at if strength is None else record.updated_at,
                )
                storage.replace([row])
            self._set_primes_after_commit(assigned)
            self._after_write([row])
        return record

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
            self._set_primes(self.storage.load_primes())
            predicted: dict[Kind, int] = {
                kind: max(table.values(), default=1) for kind, table in self._primes.items()
            }
            provisional = False

            def prime_for(kind: Kind, label: str) -> int:
                nonlocal provisional
                prime = self._primes[kind].get(label)
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
            self._set_primes(self.storage.load_primes())
            domains, subdomains, tags = self._index.counts()
            archived = (
                archive.count_by_reason(self.storage)
                if isinstance(self.storage, SQLiteStorage)
                else {}
            )

            def named(kind: Kind, counts: dict[int, int]) -> dict[str, int]:
                labels = self._labels[kind]
                return dict(sorted((labels[p], n) for p, n in counts.items()))

            return Stats(
                path=self.path,
                records=len(self._index),
                domains=named(Kind.DOMAIN, domains),
                subdomains=named(Kind.SUBDOMAIN, subdomains),
                tags=named(Kind.TAG, tags),
                registries={
                    kind.value: dict(sorted(table.items(), key=lambda kv: kv[1]))
                    for kind, table in self._primes.items()
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
    ) -> FoldReport:
        """Decay, prune, cluster and merge: keep the store small and meaningful.

        Pruned records and the members of each folded record move to the
        archive; nothing is destroyed. The fold is one transaction. Other
        processes may keep writing: the plan is re-made under the write lock if
        anything changed since it was made.

        Args:
            dry_run: report what a fold would do, and change nothing.
            now: the time to decay to (Unix seconds); the engine's clock if None.
            policy: overrides the engine's fold policy for this fold.
            progress: called as ``progress(step, done, total)`` when each step
                starts (reading records, planning, writing) and when the fold is done.

        Raises:
            InvalidInput: ``now`` or ``policy`` is bad.
            NotAvailable: the store is not the embedded SQLite store.
        """
        from . import maintenance

        return maintenance.fold(self, dry_run=dry_run, now=now, policy=policy, progress=progress)

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

        return maintenance.reinforce(self, record_id, REINFORCE_RATE)

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
