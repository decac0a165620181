"""Health checks for a store: can it be read, is it intact, and do concurrent writers survive.

The checks never write the store. The integrity, journal mode, schema and
embedding checks read it through a read-only SQLite connection, never through
the engine, whose opening would migrate an older schema. The write self-test
copies the store with SQLite's backup API into a temporary folder beside it
(so that it exercises the store's own file system), lets several processes
write to the copy at once, and counts the records that survived.

On PostgreSQL the checks read the database in a read-only session: it opens,
its schema, its embedding space, its records and their vectors. SQLite's
integrity check, WAL mode and the concurrent-write self-test do not apply
there (the server keeps its own files and takes concurrent writers), and the
report says so.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import PrimeMemoryError

__all__ = ["Check", "check_store", "self_test"]

SELF_TEST_DOMAIN = "doctor_self_test"


@dataclass(frozen=True, slots=True)
class Check:
    """One health check: its name, whether it passed, and what was found."""

    name: str
    ok: bool
    detail: str


def check_store(
    path: str | os.PathLike[str],
    *,
    processes: int = 4,
    writes: int = 25,
    on_check: Callable[[Check], None] | None = None,
) -> list[Check]:
    """Run every check on the store at ``path``; stops early when it cannot be read.

    A missing store is reported and not created. A store with an older schema
    is reported and left unmigrated; one with a newer schema is reported and
    gets no write self-test. ``processes`` x ``writes`` sizes the
    concurrent-write self-test; ``processes=0`` skips it.
    """
    checks: list[Check] = []

    def record(check: Check) -> None:
        checks.append(check)
        if on_check is not None:
            on_check(check)

    from ..storage import is_postgres_url

    if is_postgres_url(str(path)):
        _postgres_checks(str(path), record)
        return checks
    target = Path(path)
    if not target.exists():
        record(Check("store", False, f"no store at {target} yet; it is created on first store"))
        return checks
    if target.is_dir():
        record(Check("store", False, f"store path {target} is a directory; give a file path"))
        return checks
    version = _read_only_checks(target, record)
    if version is None:
        return checks
    from ..storage.migrations import latest_version

    if processes > 0 and version <= latest_version():
        record(self_test(target, processes=processes, writes=writes))
    return checks


def _read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write the store (a URI, so any file name is safe).

    Raises:
        StoreError: the busy timeout setting is bad.
        sqlite3.Error: SQLite cannot open the file.
    """
    from ..storage.sqlite import busy_timeout_from_env

    timeout = busy_timeout_from_env() / 1000
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout)


def _read_only_checks(target: Path, record: Callable[[Check], None]) -> int | None:
    """Record the read-only checks; the store's schema version, or None to stop."""
    from ..storage.sqlite import _translate, store_file_bytes

    name = "opens"
    try:
        with contextlib.closing(_read_only(target)) as db:
            tables = {
                str(row[0])
                for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            size = store_file_bytes(target)
            record(Check(name, True, f"{target} ({size:,} bytes), opened read-only"))
            name = "integrity"
            rows = [str(r[0]) for r in db.execute("PRAGMA integrity_check")]
            intact = rows == ["ok"]
            record(Check(name, intact, "ok" if intact else "; ".join(rows[:5])))
            name = "wal mode"
            mode = str(db.execute("PRAGMA journal_mode").fetchone()[0])
            record(Check(name, mode.lower() == "wal", f"journal_mode={mode}"))
            name = "schema"
            version = _schema_check(db, tables, record)
            space = None
            if "meta" in tables:
                name = "embedding"
                meta = _space_meta(db.execute(_SPACE_SQL, _SPACE_KEYS).fetchall())
                space = meta.get(_SPACE_KEYS[0])
                record(_embedding_check(meta))
            if "records" in tables:
                name = "records"
                count, bare = (int(n) for n in db.execute(_COUNTS_SQL).fetchone())
                record(Check(name, True, f"{count:,}"))
                record(_vectors_check(count, bare, space))
            return version
    except sqlite3.Error as exc:
        if "unable to open" in str(exc):
            detail = (
                f"store {target} cannot be opened for reading ({exc}); check the file and "
                "folder permissions"
            )
        else:
            detail = str(_translate(exc, str(target)))
        record(Check(name, False, detail))
    except PrimeMemoryError as exc:
        record(Check(name, False, str(exc)))
    return None


def _schema_check(db: sqlite3.Connection, tables: set[str], record: Callable[[Check], None]) -> int:
    """Record how the store's schema compares with this version's; returns the store's."""
    from ..storage.migrations import MIGRATIONS, latest_version

    applied: set[int] = set()
    if "schema_migrations" in tables:
        applied = {int(row[0]) for row in db.execute("SELECT version FROM schema_migrations")}
    version = max(applied, default=0)
    newest = latest_version()
    if version > newest:
        detail = (
            f"version {version}, newer than this version of prime-memory-folding knows "
            f"({newest}); it cannot open the store: upgrade the package"
        )
    elif version < newest:
        pending = sorted(
            (m for m in MIGRATIONS if m.version not in applied), key=lambda m: m.version
        )
        steps = ", ".join(f"{m.version} ({m.name})" for m in pending)
        detail = (
            f"version {version} of {newest}: migration {steps} pending, not applied by doctor; "
            "the next open by the engine, CLI or server applies it (back the store up first "
            "to keep a copy at the old schema)"
        )
    else:
        detail = f"version {version} of {newest}"
    record(Check("schema", version == newest, detail))
    return version


_SPACE_KEYS = ("embedding_space", "embedding_dim")
_SPACE_SQL = "SELECT key, value FROM meta WHERE key IN (?, ?)"
_COUNTS_SQL = "SELECT count(*), count(*) - count(vector) FROM records"


def _space_meta(rows: list[tuple[object, object]]) -> dict[str, str]:
    return {str(key): str(value) for key, value in rows}


def _embedding_check(meta: dict[str, str]) -> Check:
    """Whether the configured embedder may open a store of this embedding space."""
    from ..recall.space import CUSTOM_PREFIX, DIM_KEY, SPACE_KEY
    from ..recall.text_embedding import TextEmbedding

    space = meta.get(SPACE_KEY)
    if space is None:
        return Check("embedding", True, "no vectors stored yet")
    detail = f"{space} ({meta.get(DIM_KEY, '?')} dimensions)"
    text = TextEmbedding(None)
    if space.startswith(CUSTOM_PREFIX) or not text.enabled:
        return Check("embedding", True, detail)
    try:
        configured = text.name()
    except PrimeMemoryError as exc:
        return Check("embedding", False, f"{detail}; the configured embedder fails: {exc}")
    if configured == space:
        return Check("embedding", True, detail)
    return Check(
        "embedding",
        False,
        f"{detail}, but {text.setting} configures {configured!r}; set {text.setting} to "
        f"{space!r}, or move the store with prime-memory reembed",
    )


def _vectors_check(count: int, bare: int, space: str | None) -> Check:
    """Whether every record has a vector, when the store embeds its contents."""
    from ..recall.space import CUSTOM_PREFIX
    from ..recall.text_embedding import TextEmbedding

    if space is not None and space.startswith(CUSTOM_PREFIX):
        return Check("vectors", True, f"{bare:,} of {count:,} without one (vectors callers bring)")
    if not TextEmbedding(None).enabled:
        return Check("vectors", True, f"{bare:,} of {count:,} without one (embedding is off)")
    if not bare:
        return Check("vectors", True, f"every one of {count:,} records has one")
    return Check(
        "vectors",
        False,
        f"{bare:,} of {count:,} records have no vector, so text queries rank them on words "
        "alone; embed them with prime-memory reembed",
    )


_NOT_ON_POSTGRES = (
    ("integrity", "PostgreSQL keeps its own files; check them with the server's tools"),
    ("wal mode", "SQLite's journal mode; PostgreSQL always logs ahead"),
    ("concurrent writes", "a self-test of SQLite's locking; PostgreSQL's server takes turns"),
)


def _postgres_checks(url: str, record: Callable[[Check], None]) -> None:
    """Record the checks that apply to a PostgreSQL store, read in a read-only session."""
    import psycopg

    from ..storage.pg_connect import connect_options, reason_of, redact, wait_limit
    from ..storage.pg_schema import latest_pg_version

    shown = redact(url)
    try:
        options = connect_options(url, wait_limit(url))
        with psycopg.connect(url, autocommit=True, **options) as conn:
            conn.read_only = True
            version = conn.info.server_version
            record(Check("opens", True, f"{shown} (PostgreSQL {version // 10000}), read-only"))
            for name, why in _NOT_ON_POSTGRES:
                record(Check(name, True, f"does not apply to PostgreSQL: {why}"))
            tables = {
                str(row[0])
                for row in conn.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema()"
                ).fetchall()
            }
            applied = 0
            if "schema_migrations" in tables:
                row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
                applied = int(row[0]) if row and row[0] is not None else 0
            newest = latest_pg_version()
            if not tables:
                record(Check("schema", True, "no tables yet; the first store makes them"))
                return
            if applied == newest:
                detail = f"version {applied} of {newest}"
            elif applied > newest:
                detail = (
                    f"version {applied}, newer than this version of prime-memory-folding knows "
                    f"({newest}); upgrade the package"
                )
            else:
                detail = (
                    f"version {applied} of {newest}; the next open by the engine, CLI or "
                    "server migrates it"
                )
            record(Check("schema", applied == newest, detail))
            space = None
            if "meta" in tables:
                rows = conn.execute(_SPACE_SQL.replace("?", "%s"), _SPACE_KEYS).fetchall()
                meta = _space_meta(rows)
                space = meta.get(_SPACE_KEYS[0])
                record(_embedding_check(meta))
            if "records" in tables:
                counted = conn.execute(_COUNTS_SQL).fetchone()
                count, bare = (int(n) for n in counted) if counted else (0, 0)
                record(Check("records", True, f"{count:,}"))
                record(_vectors_check(count, bare, space))
    except psycopg.Error as exc:
        record(Check("opens", False, f"cannot read PostgreSQL at {shown} ({reason_of(exc, url)})"))
    except PrimeMemoryError as exc:
        record(Check("opens", False, str(exc)))


def self_test(path: str | os.PathLike[str], *, processes: int = 4, writes: int = 25) -> Check:
    """Copy the store, let ``processes`` processes store ``writes`` records each, count them.

    The copy goes in a temporary folder beside the store, or in the system's
    temporary folder (the detail says so) when the store's folder is not writable.
    """
    from .facade import MemoryEngine

    store = Path(path)
    note = ""
    try:
        scratch = tempfile.TemporaryDirectory(prefix="prime-memory-doctor-", dir=store.parent)
    except OSError as exc:
        scratch = tempfile.TemporaryDirectory(prefix="prime-memory-doctor-")
        note = (
            f"; the copy ran in {tempfile.gettempdir()}, not beside the store, since "
            f"{store.parent} is not writable ({exc.strerror or exc})"
        )
    with scratch as folder:
        copy = Path(folder) / "copy.db"
        try:
            with (
                contextlib.closing(_read_only(store)) as source,
                contextlib.closing(sqlite3.connect(copy)) as target,
            ):
                source.backup(target)
            with MemoryEngine(copy) as engine:
                before = len(engine.match_ids(domain=SELF_TEST_DOMAIN))
        except (sqlite3.Error, PrimeMemoryError) as exc:
            return Check("concurrent writes", False, f"the copy could not be made or opened: {exc}")
        context = multiprocessing.get_context("spawn")
        workers = [
            context.Process(target=_write_many, args=(str(copy), worker, writes))
            for worker in range(processes)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        failed = [w.exitcode for w in workers if w.exitcode != 0]
        with MemoryEngine(copy) as engine:
            survivors = len(engine.match_ids(domain=SELF_TEST_DOMAIN)) - before
    expected = processes * writes
    detail = f"{processes} processes x {writes} writes: {survivors}/{expected} survived"
    if failed:
        detail += f"; {len(failed)} writer(s) failed"
    return Check("concurrent writes", survivors == expected and not failed, detail + note)


def _write_many(path: str, worker: int, writes: int) -> None:
    from .facade import MemoryEngine

    with MemoryEngine(path) as engine:
        for n in range(writes):
            engine.store(
                f"self-test write {n} from worker {worker}",
                domain=SELF_TEST_DOMAIN,
                tags=[f"worker_{worker}"],
            )
