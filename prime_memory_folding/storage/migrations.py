"""Schema migrations for the SQLite store.

Each migration is a named function registered under a version number. They run
in order, each in its own transaction, and each applied version is recorded in
``schema_migrations``. Numbers are never reused or renumbered.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..core.primes import default_primes
from . import sqlite_text

__all__ = [
    "MIGRATIONS",
    "Migration",
    "latest_version",
    "migration",
    "run_script",
]

MigrationFn = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True)
class Migration:
    """One schema step."""

    version: int
    name: str
    apply: MigrationFn


MIGRATIONS: list[Migration] = []


def migration(version: int) -> Callable[[MigrationFn], MigrationFn]:
    """Register ``fn`` as schema step ``version``."""

    def register(fn: MigrationFn) -> MigrationFn:
        MIGRATIONS.append(Migration(version, fn.__name__, fn))
        return fn

    return register


def run_script(db: sqlite3.Connection, script: str) -> None:
    """Execute a multi-statement script inside the caller's transaction.

    ``Connection.executescript`` commits first, which would break a migration's
    atomicity, so statements are split with SQLite's own completeness test.
    """
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            db.execute(pending)
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement in migration: {pending.strip()[:80]}")


def latest_version() -> int:
    """The newest schema version this code knows."""
    return max(m.version for m in MIGRATIONS)


@migration(1)
def create_core_tables(db: sqlite3.Connection) -> None:
    run_script(
        db,
        """
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE primes (
            kind TEXT NOT NULL CHECK (kind IN ('domain', 'subdomain', 'tag')),
            label TEXT NOT NULL,
            prime INTEGER NOT NULL,
            PRIMARY KEY (kind, label),
            UNIQUE (kind, prime)
        );
        CREATE TABLE records (
            id INTEGER PRIMARY KEY,
            record_id TEXT NOT NULL UNIQUE,
            dedupe_key TEXT NOT NULL UNIQUE,
            domain TEXT NOT NULL,
            subdomain TEXT NOT NULL,
            tags TEXT NOT NULL,
            tag_product TEXT NOT NULL,
            content TEXT NOT NULL,
            vector BLOB,
            importance REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
            strength REAL NOT NULL CHECK (strength BETWEEN 0 AND 1),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            accessed_at REAL NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}',
            instance_key TEXT
        );
        CREATE INDEX records_domain ON records (domain, subdomain);
        CREATE TABLE changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            record_id TEXT NOT NULL
        );
        CREATE TRIGGER records_change_insert AFTER INSERT ON records BEGIN
            INSERT INTO changes (record_id) VALUES (new.record_id);
        END;
        CREATE TRIGGER records_change_update AFTER UPDATE ON records BEGIN
            INSERT INTO changes (record_id) VALUES (new.record_id);
        END;
        CREATE TRIGGER records_change_delete AFTER DELETE ON records BEGIN
            INSERT INTO changes (record_id) VALUES (old.record_id);
        END;
        """,
    )
    db.executemany(
        "INSERT INTO primes (kind, label, prime) VALUES (?, ?, ?)",
        [(kind.value, label, prime) for kind, label, prime in default_primes()],
    )


# -- text recall: migration 2 -----------------------------------------------------


@migration(2)
def create_text_search(db: sqlite3.Connection) -> None:
    """Full-text indexes over ``records.content``, kept in sync by triggers
    (:func:`.sqlite_text.text_search_schema`)."""
    run_script(db, sqlite_text.text_search_schema())


# -- folding: migration 3 -------------------------------------------------------


@migration(3)
def create_fold_archive(db: sqlite3.Connection) -> None:
    """Decay bookkeeping on ``records`` and the archive that folding moves records to.

    ``strength_at`` is when ``strength`` was last set by a fold or an explicit
    update (NULL: by the last reinforcement, ``accessed_at``). ``archive`` keeps
    every column of a record exactly, with why and when it left ``records``.
    """
    run_script(
        db,
        """
        ALTER TABLE records ADD COLUMN strength_at REAL;
        CREATE TABLE archive (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            reason TEXT NOT NULL CHECK (reason IN ('pruned', 'folded')),
            detail TEXT NOT NULL,
            folded_into TEXT,
            archived_at REAL NOT NULL,
            record_id TEXT NOT NULL,
            dedupe_key TEXT NOT NULL,
            domain TEXT NOT NULL,
            subdomain TEXT NOT NULL,
            tags TEXT NOT NULL,
            tag_product TEXT NOT NULL,
            content TEXT NOT NULL,
            vector BLOB,
            importance REAL NOT NULL,
            strength REAL NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            accessed_at REAL NOT NULL,
            access_count INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            instance_key TEXT,
            strength_at REAL
        );
        CREATE INDEX archive_record ON archive (record_id);
        CREATE INDEX archive_folded_into ON archive (folded_into);
        """,
    )


# -- fewer pages per commit: migration 4 ------------------------------------------


@migration(4)
def lighten_commits(db: sqlite3.Connection) -> None:
    """Two fewer pages written by every store's commit.

    ``records_domain`` answered no query (the in-memory index serves domains),
    yet each insert updated it. ``changes`` counted with ``AUTOINCREMENT``,
    which rewrites ``sqlite_sequence`` on every insert; a plain integer key
    also only grows here, because trimming always keeps the newest entries.
    Existing sequence numbers are kept (an emptied log keeps its last number as
    a placeholder entry), so readers catch up across the change.
    """
    run_script(
        db,
        """
        DROP INDEX records_domain;
        DROP TRIGGER records_change_insert;
        DROP TRIGGER records_change_update;
        DROP TRIGGER records_change_delete;
        ALTER TABLE changes RENAME TO changes_old;
        CREATE TABLE changes (
            seq INTEGER PRIMARY KEY,
            record_id TEXT NOT NULL
        );
        INSERT INTO changes (seq, record_id) SELECT seq, record_id FROM changes_old;
        INSERT INTO changes (seq, record_id)
            SELECT seq, '' FROM sqlite_sequence
            WHERE name = 'changes_old' AND seq > 0 AND NOT EXISTS (SELECT 1 FROM changes);
        DROP TABLE changes_old;
        CREATE TRIGGER records_change_insert AFTER INSERT ON records BEGIN
            INSERT INTO changes (record_id) VALUES (new.record_id);
        END;
        CREATE TRIGGER records_change_update AFTER UPDATE ON records BEGIN
            INSERT INTO changes (record_id) VALUES (new.record_id);
        END;
        CREATE TRIGGER records_change_delete AFTER DELETE ON records BEGIN
            INSERT INTO changes (record_id) VALUES (old.record_id);
        END;
        """,
    )


# -- archive counts by reason: migration 5 ------------------------------------------


@migration(5)
def index_archive_reasons(db: sqlite3.Connection) -> None:
    """Count the archive per reason from a small index, not by reading every entry.

    ``stats()`` counts archived records per reason on every call; without an
    index that read the whole archive, vectors and contents included, and the
    archive grows with every fold. The index also holds ``folded_into``, so that
    finding a folded record's members (``reason = 'folded' AND folded_into = ?``)
    still reads just those members: an index on the reason alone would lead
    SQLite to walk every folded entry instead. That query was the only one the
    ``folded_into`` index served, so it goes, and an archived record still
    updates two indexes, not three.
    """
    run_script(
        db,
        """
        CREATE INDEX archive_reason ON archive (reason, folded_into);
        DROP INDEX archive_folded_into;
        """,
    )


# -- scopes: migration 6 ----------------------------------------------------------------


@migration(6)
def add_scopes(db: sqlite3.Connection) -> None:
    """Every record, live or archived, belongs to one scope; existing ones to ``global``.

    The default puts every record stored before scopes existed in ``global``,
    which every reader sees, so nothing is lost and nothing moves: their ids
    and dedupe keys are what ``global`` gives (see ``address.concept_bucket``).
    """
    run_script(
        db,
        """
        ALTER TABLE records ADD COLUMN scope TEXT NOT NULL DEFAULT 'global';
        ALTER TABLE archive ADD COLUMN scope TEXT NOT NULL DEFAULT 'global';
        """,
    )


# -- forgotten records are archived: migration 7 --------------------------------------------


@migration(7)
def archive_forgotten(db: sqlite3.Connection) -> None:
    """The archive also keeps forgotten records and the versions updates replaced.

    Reason ``forgotten``: a record forgotten on purpose, restorable. Reason
    ``replaced``: the version of a record that an update corrected, kept as its
    history (``folded_into`` is the record's own id), while the record lives on.

    SQLite cannot change a CHECK constraint in place, so the archive is rebuilt
    with the wider one (:func:`_rebuild_archive`).
    """
    _rebuild_archive(db, ("pruned", "folded", "forgotten", "replaced"), sessions=False)


def _rebuild_archive(db: sqlite3.Connection, reasons: Sequence[str], *, sessions: bool) -> None:
    """The archive made again with a CHECK of ``reasons``: every entry keeps its
    ``seq`` and every column (``session`` too, once migration 10 added it), the
    sequence goes on from where it was, and the two indexes are made again."""
    columns = (
        "seq, reason, detail, folded_into, archived_at, record_id, dedupe_key, domain, "
        "subdomain, tags, tag_product, content, vector, importance, strength, created_at, "
        "updated_at, accessed_at, access_count, metadata, instance_key, strength_at, scope"
        + (", session" if sessions else "")
    )
    allowed = ", ".join(f"'{reason}'" for reason in reasons)
    session = ",\n            session TEXT" if sessions else ""
    run_script(
        db,
        f"""
        CREATE TABLE archive_new (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            reason TEXT NOT NULL CHECK (reason IN ({allowed})),
            detail TEXT NOT NULL,
            folded_into TEXT,
            archived_at REAL NOT NULL,
            record_id TEXT NOT NULL,
            dedupe_key TEXT NOT NULL,
            domain TEXT NOT NULL,
            subdomain TEXT NOT NULL,
            tags TEXT NOT NULL,
            tag_product TEXT NOT NULL,
            content TEXT NOT NULL,
            vector BLOB,
            importance REAL NOT NULL,
            strength REAL NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            accessed_at REAL NOT NULL,
            access_count INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            instance_key TEXT,
            strength_at REAL,
            scope TEXT NOT NULL DEFAULT 'global'{session}
        );
        INSERT INTO archive_new ({columns}) SELECT {columns} FROM archive ORDER BY seq;
        DELETE FROM sqlite_sequence WHERE name = 'archive_new';
        INSERT INTO sqlite_sequence (name, seq)
            SELECT 'archive_new', seq FROM sqlite_sequence WHERE name = 'archive';
        DROP TABLE archive;
        ALTER TABLE archive_new RENAME TO archive;
        CREATE INDEX archive_record ON archive (record_id);
        CREATE INDEX archive_reason ON archive (reason, folded_into);
        """,
    )


# -- incremental folds: migration 8 -------------------------------------------------


@migration(8)
def create_fold_marks(db: sqlite3.Connection) -> None:
    """When each record will fade below the prune threshold, indexed.

    Decay is a pure function of a record's last reinforcement and its
    half-life, so the moment it falls below the policy's ``prune_below`` is
    known once a fold has seen it. ``fold_marks`` keeps that moment for every
    record that can fade (permanent records have no row), so that a fold finds
    the records due for pruning with one range query instead of reading the
    store. A fold writes the rows of the records it screened; the change log
    tells the next fold which records are new or changed since.
    """
    run_script(
        db,
        """
        CREATE TABLE fold_marks (
            record_id TEXT PRIMARY KEY,
            prune_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX fold_marks_prune_at ON fold_marks (prune_at);
        """,
    )


# -- access tokens: migration 9 ---------------------------------------------------------


@migration(9)
def create_tokens(db: sqlite3.Connection) -> None:
    """Per-user bearer tokens for the HTTP server, kept by the hash of their secret.

    ``scopes`` is a JSON array of scope patterns. A name is unique among live
    tokens only (a partial index), so a user can get a new token once the old
    one is revoked, and revoked tokens stay listed.
    """
    run_script(
        db,
        """
        CREATE TABLE tokens (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            scopes TEXT NOT NULL,
            read_only INTEGER NOT NULL CHECK (read_only IN (0, 1)),
            created_at REAL NOT NULL,
            revoked_at REAL
        );
        CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at IS NULL;
        """,
    )


# -- sessions: migration 10 ---------------------------------------------------------------


@migration(10)
def add_sessions(db: sqlite3.Connection) -> None:
    """A record may belong to a session (a conversation), when its writer names one.

    Records and archive entries from before have none (NULL). No index: the
    in-memory index finds a record's session neighbours, and an index that
    answers no query would only cost every insert a write.
    """
    run_script(
        db,
        """
        ALTER TABLE records ADD COLUMN session TEXT;
        ALTER TABLE archive ADD COLUMN session TEXT;
        """,
    )


# -- reads without the engine: migration 11 -------------------------------------------------


@migration(11)
def index_scopes_and_sessions(db: sqlite3.Connection) -> None:
    """Indexes for the reads a hook makes without loading the engine (``sqlite_peek.py``):
    a scope's memories of some domains, best first, from the index alone; and one
    session's records in order (only records that belong to a session are in it).
    """
    run_script(
        db,
        """
        CREATE INDEX records_scope_domain ON records (scope, domain, importance, strength);
        CREATE INDEX records_session ON records (session, created_at) WHERE session IS NOT NULL;
        """,
    )


# -- groups kept apart: migration 12 ------------------------------------------------------


@migration(12)
def create_fold_apart(db: sqlite3.Connection) -> None:
    """Groups of records that folds keep apart: no fold merges two records of one group.

    An unfold writes one, the records it brought back, so that the next fold
    does not merge them again; each may still fold with other records. A row
    names one member of one group (``set_id``); ids need not be live (a
    member may wait in the archive, to be restored), and a purge drops the
    rows of records gone for good. The index on ``record_id`` finds the
    groups of the records a fold merges or an unfold brings back.
    """
    run_script(
        db,
        """
        CREATE TABLE fold_apart (
            set_id INTEGER NOT NULL,
            record_id TEXT NOT NULL,
            PRIMARY KEY (set_id, record_id)
        ) WITHOUT ROWID;
        CREATE INDEX fold_apart_record ON fold_apart (record_id);
        """,
    )


# -- superseded and stale memories: migration 13 --------------------------------------------


@migration(13)
def archive_superseded_and_stale(db: sqlite3.Connection) -> None:
    """The archive also keeps closed versions and stale memories about code.

    Reason ``superseded``: a memory a newer one replaced (``store(supersedes=...)``);
    ``folded_into`` names its successor and ``archived_at`` is when it stopped
    being valid. Reason ``stale``: a memory whose cited code changed and that
    nobody used for a while, archived by a fold. Both are restorable.

    SQLite cannot change a CHECK constraint in place, so the archive is rebuilt
    as migration 7 rebuilt it (:func:`_rebuild_archive`).
    """
    reasons = ("pruned", "folded", "forgotten", "replaced", "superseded", "stale")
    _rebuild_archive(db, reasons, sessions=True)


@migration(14)
def create_cite_checks(db: sqlite3.Connection) -> None:
    """When each memory that cites code last had every citation verified (or moved).

    ``check_citations`` writes a row per memory it verified, beside the
    record rather than in it, so that a check leaves no history and changes
    nothing other processes must read again. A fold's expiry reads it: a
    memory about code neither verified nor used for a while decays faster,
    and is archived as ``stale`` once its citations are. The partial index
    holds only the records that cite code, so a fold finds them without
    reading the table.
    """
    run_script(
        db,
        """
        CREATE TABLE cite_checks (
            record_id TEXT PRIMARY KEY,
            verified_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX records_cites ON records (record_id, accessed_at)
            WHERE metadata LIKE '%"cites"%';
        """,
    )
