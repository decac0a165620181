"""Copy a whole store to another, on either backend: SQLite and PostgreSQL.

:func:`copy_store` makes the destination hold exactly what the source holds:

- every record, with its id, labels, content, vector bytes, scores, times,
  access count, metadata, instance key, dedupe key, scope and session, in
  the source's order;
- the archive: every entry with its sequence number, reason, detail, the
  record it was folded into and when it was archived;
- the prime registries, copied first, so that the destination gives each
  label the source's prime and assigns none of its own;
- the store's settings (its embedding space, when it last folded) and the
  fold marks (when each record will fade). Where the last fold got to in the
  change log is not copied: the change log is the destination's own, so its
  next fold screens every record;
- the groups of records that folds keep apart (the memories an unfold
  brought back);
- access tokens, when both stores keep them. A destination's own tokens
  stay; a source token whose secret the destination already has is not
  copied twice.

The source is read in batches, keyed on its order, inside one read snapshot,
so memory stays bounded and writers to the source may go on. The
destination is written in one transaction: a copy that fails, or is
interrupted, leaves it as it was (a new SQLite file it created is removed).

A destination that holds records or archive entries is refused, unless
``replace`` is set: then its records, archive, registries, settings, fold
marks and kept-apart groups are replaced by the source's.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import InvalidInput, StoreError
from . import is_postgres_url, open_storage
from .postgres import PostgresStorage, redact
from .sqlite import SQLiteStorage, stored_row

__all__ = ["CopyReport", "DestinationNotEmpty", "Progress", "copy_store", "describe"]

#: ``progress(step, done, total)``: ``done`` grows to ``total`` over the whole copy.
Progress = Callable[[str, int, int], None]

#: Rows read and written per batch.
BATCH = 2_000
#: Settings that belong to a store's own change log, never copied.
_LOCAL_META = frozenset({"fold_state"})

_RECORD_COLUMNS = (
    "record_id, dedupe_key, domain, subdomain, tags, tag_product, content, vector, "
    "importance, strength, created_at, updated_at, accessed_at, access_count, metadata, "
    "instance_key, strength_at, scope, session"
)
_ARCHIVE_COLUMNS = f"seq, reason, detail, folded_into, archived_at, {_RECORD_COLUMNS}"

Store = SQLiteStorage | PostgresStorage


@dataclass(frozen=True, slots=True)
class CopyReport:
    """What a copy wrote into the destination."""

    source: str
    destination: str
    records: int
    archived: int
    registry_labels: int
    settings: int
    fold_marks: int
    #: Tokens copied, or None when either store keeps no tokens.
    tokens: int | None
    #: The source's tokens left behind because the destination keeps none.
    tokens_left: int
    #: Whether the destination held records or archive entries that were replaced.
    replaced: bool
    #: Rows of the groups that folds keep apart (one a member).
    kept_apart: int = 0


class DestinationNotEmpty(InvalidInput):
    """The destination holds records or archive entries, and replacing them was not asked for."""

    def __init__(self, destination: str, held: int) -> None:
        super().__init__(
            f"the destination {destination} is not empty ({held:,} records and archive "
            "entries); copy into a new store, or replace its contents on purpose"
        )
        self.destination = destination
        self.held = held


def describe(location: str | os.PathLike[str]) -> str:
    """A store location as messages show it: a URL without its password."""
    text = os.fspath(location)
    return redact(text) if is_postgres_url(text) else text


def copy_store(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    replace: bool = False,
    progress: Progress | None = None,
) -> CopyReport:
    """Copy every record, the archive, registries, settings and tokens to ``destination``.

    Either may be an SQLite file or a ``postgresql://`` URL. A missing
    destination file is created.

    Raises:
        DestinationNotEmpty: the destination holds records or archive entries
            and ``replace`` is not set. Nothing was written.
        InvalidInput: the two name the same store, the source file does not
            exist, or ``:memory:`` was given. Nothing was written.
        StoreError: a store cannot be opened, read or written (a database
            that does not answer, say); the destination is as it was.
    """
    src_text, dst_text = os.fspath(source), os.fspath(destination)
    for text, role in ((src_text, "source"), (dst_text, "destination")):
        if not text.strip():
            raise InvalidInput(f"the {role} store is empty text; give a file path or a URL")
        if text == ":memory:":
            raise InvalidInput(f"the {role} store cannot be :memory:; give a file path or a URL")
    if not is_postgres_url(src_text):
        src_path = Path(src_text).expanduser()
        if not src_path.is_file():
            raise InvalidInput(f"no store at {src_text}; check the source path")
        src_text = str(src_path)
    created: Path | None = None
    if not is_postgres_url(dst_text):
        dst_path = Path(dst_text).expanduser()
        if not is_postgres_url(src_text) and dst_path.exists():
            with contextlib.suppress(OSError):
                if os.path.samefile(src_text, dst_path):
                    raise InvalidInput(
                        f"{src_text} and {dst_text} are the same store; give another destination"
                    )
        if not dst_path.exists():
            created = dst_path
        dst_text = str(dst_path)
    elif is_postgres_url(src_text) and src_text == dst_text:
        raise InvalidInput(
            f"{describe(src_text)} is both source and destination; give another destination"
        )
    try:
        with contextlib.ExitStack() as stack:
            src = _open(src_text)
            stack.callback(src.close)
            dst = _open(dst_text)
            stack.callback(dst.close)
            if _identity(src) == _identity(dst):
                raise InvalidInput(
                    f"{describe(src_text)} and {describe(dst_text)} are the same store; "
                    "give another destination"
                )
            return _copy(src, dst, replace=replace, progress=progress)
    except BaseException:
        if created is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(OSError):
                    os.remove(f"{created}{suffix}")
        raise


def _open(location: str) -> Store:
    storage = open_storage(location)
    if not isinstance(storage, (SQLiteStorage, PostgresStorage)):  # pragma: no cover
        storage.close()
        raise StoreError(f"cannot copy {describe(location)}: an unknown kind of store")
    return storage


def _identity(store: Store) -> tuple[str, ...]:
    """What tells two open stores apart: a file's real path, a database and its schema."""
    if isinstance(store, SQLiteStorage):
        return ("sqlite", os.path.realpath(store.path))
    row = store.run(
        "SELECT current_database(), current_schema(), inet_server_port()::text, "
        "pg_postmaster_start_time()::text"
    ).fetchone()
    return ("postgresql", *(str(value) for value in row or ()))


@contextlib.contextmanager
def _snapshot(store: Store) -> Iterator[None]:
    """One consistent view of the source for every read, without blocking its writers."""
    with store.read_snapshot():
        yield


def _count(store: Store, table: str) -> int:
    row = store.db.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def _pages(store: Store, columns: str, table: str, key: str) -> Iterator[list[Any]]:
    """Every row of ``table`` in ``key`` order, :data:`BATCH` at a time (keyset paging)."""
    after: Any = None
    while True:
        if after is None:
            sql = f"SELECT {key}, {columns} FROM {table} ORDER BY {key} LIMIT ?"
            params: tuple[Any, ...] = (BATCH,)
        else:
            sql = f"SELECT {key}, {columns} FROM {table} WHERE {key} > ? ORDER BY {key} LIMIT ?"
            params = (after, BATCH)
        rows = list(store.db.execute(sql, params).fetchall())
        if not rows:
            return
        after = rows[-1][0]
        yield [tuple(row[1:]) for row in rows]
        if len(rows) < BATCH:
            return


@runtime_checkable
class _TokenStore(Protocol):
    """A store that keeps access tokens."""

    def tokens(self) -> Sequence[Any]: ...
    def add_token(self, row: Any) -> None: ...


def _copy_tokens(src: Store, dst: Store) -> tuple[int | None, int]:
    """Copy the source's tokens (revoked ones too) that the destination lacks.

    Returns how many were copied (None when either store keeps no tokens)
    and how many the source holds that the destination cannot keep. A
    source token whose name is live in the destination under another secret
    stops the copy (the destination raises :class:`InvalidInput`).
    """
    if not isinstance(src, _TokenStore):
        return None, 0
    if not isinstance(dst, _TokenStore):
        return None, len(src.tokens())
    have = {row.token_hash for row in dst.tokens()}
    copied = 0
    for row in src.tokens():
        if row.token_hash not in have:
            dst.add_token(row)
            copied += 1
    return copied, 0


def _copy(src: Store, dst: Store, *, replace: bool, progress: Progress | None) -> CopyReport:
    source, destination = src.path, dst.path
    with _snapshot(src), dst.transaction():
        held = _count(dst, "records") + _count(dst, "archive")
        if held and not replace:
            raise DestinationNotEmpty(destination, held)
        primes = list(src.db.execute("SELECT kind, label, prime FROM primes").fetchall())
        meta = [
            (key, value)
            for key, value in src.db.execute("SELECT key, value FROM meta").fetchall()
            if key not in _LOCAL_META
        ]
        counts = {
            "records": _count(src, "records"),
            "archive": _count(src, "archive"),
            "fold marks": _count(src, "fold_marks"),
            "kept apart": _count(src, "fold_apart"),
        }
        total = len(primes) + len(meta) + sum(counts.values())
        done = 0

        def advance(step: str, rows: int) -> None:
            nonlocal done
            done += rows
            if progress is not None:
                progress(step, done, total)

        if progress is not None:
            progress("registries", 0, total)
        # Emptied first: a destination made by this version holds the same
        # built-in labels, and replacing it must leave none of its own behind.
        for table in ("fold_apart", "fold_marks", "records", "archive", "primes", "meta"):
            dst.db.execute(f"DELETE FROM {table}")
        dst.db.executemany(
            "INSERT INTO primes (kind, label, prime) VALUES (?, ?, ?)",
            [(str(kind), str(label), int(prime)) for kind, label, prime in primes],
        )
        advance("registries", len(primes))
        dst.db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta)
        advance("settings", len(meta))
        for batch in _pages(src, _RECORD_COLUMNS, "records", "id"):
            dst.insert([stored_row(row) for row in batch])
            advance("records", len(batch))
        marks = ",".join("?" * (_ARCHIVE_COLUMNS.count(",") + 1))
        for batch in _pages(src, _ARCHIVE_COLUMNS, "archive", "seq"):
            dst.db.executemany(f"INSERT INTO archive ({_ARCHIVE_COLUMNS}) VALUES ({marks})", batch)
            advance("archive", len(batch))
        if isinstance(dst, PostgresStorage):
            # Entries kept their numbers; the next one archived counts on from them.
            dst.run(
                "SELECT setval(pg_get_serial_sequence('archive', 'seq'), "
                "coalesce(max(seq), 1), max(seq) IS NOT NULL) FROM archive"
            )
        for batch in _pages(src, "record_id, prune_at", "fold_marks", "record_id"):
            dst.db.executemany("INSERT INTO fold_marks (record_id, prune_at) VALUES (?, ?)", batch)
            advance("fold marks", len(batch))
        apart = src.db.execute("SELECT set_id, record_id FROM fold_apart").fetchall()
        dst.db.executemany(
            "INSERT INTO fold_apart (set_id, record_id) VALUES (?, ?)",
            [(int(set_id), str(rid)) for set_id, rid in apart],
        )
        advance("kept apart", len(apart))
        tokens, tokens_left = _copy_tokens(src, dst)
    return CopyReport(
        source=source,
        destination=destination,
        records=counts["records"],
        archived=counts["archive"],
        registry_labels=len(primes),
        settings=len(meta),
        fold_marks=counts["fold marks"],
        tokens=tokens,
        tokens_left=tokens_left,
        replaced=bool(held),
        kept_apart=counts["kept apart"],
    )
