"""Schema migrations for the PostgreSQL store.

Numbered like the SQLite store's, and run by :class:`~.postgres.PostgresStorage`
under a transaction-level advisory lock, so that servers starting at once apply
each step exactly once. Numbers are never reused or renumbered; they count on
their own, apart from the SQLite schema's.

The tables hold the same columns as the SQLite store, under the same names, so
that a store copies between the two exactly. PostgreSQL adds what its query
planner gates on, filled by triggers from the labels and the text, whatever
statement writes a row:

- ``domain_prime``, ``subdomain_prime`` (B-tree) and ``tag_primes``, a
  ``bigint[]`` of the record's tag primes (GIN: ``@>`` all-of, ``&&`` any-of).
  Primes are unsigned 32-bit numbers, which ``int4`` cannot hold;
- ``lex``, a ``tsvector`` of the content (GIN), which finds a text query's
  candidates. It uses PostgreSQL's ``english`` configuration, which stems
  words (Snowball) and leaves out stop words, as the SQLite store's Porter
  tokenizer stems them; Latin letters lose their diacritics first
  (:func:`folded`), as the SQLite tokenizer's do, so ``creme`` finds ``Crème``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.primes import default_primes
from .pg_decay import STORE_DECAY, class_sql, key_sql

__all__ = ["PG_MIGRATIONS", "PgMigration", "folded", "latest_pg_version"]


@dataclass(frozen=True)
class PgMigration:
    """One schema step: SQL statements, then an optional function of the cursor."""

    version: int
    name: str
    statements: tuple[str, ...]
    then: Callable[[Any], None] | None = None


def _diacritics() -> tuple[str, str]:
    """Latin letters with diacritics (U+00C0 to U+024F), and each one's bare letter."""
    marked = bare = ""
    for code in range(0xC0, 0x250):
        parts = unicodedata.normalize("NFD", chr(code))
        if (
            len(parts) > 1
            and parts[0].isascii()
            and parts[0].isalpha()
            and all(unicodedata.combining(mark) for mark in parts[1:])
        ):
            marked += chr(code)
            bare += parts[0]
    return marked, bare


_MARKED, _BARE = _diacritics()


def folded(expression: str) -> str:
    """SQL for ``expression``'s text with the diacritics of Latin letters removed.

    ``translate`` is immutable, so a generated column may use it; the text a
    query searches for goes through the same function.
    """
    return f"translate({expression}, '{_MARKED}', '{_BARE}')"


def _seed_primes(cur: Any) -> None:
    cur.executemany(
        "INSERT INTO primes (kind, label, prime) VALUES (%s, %s, %s)",
        [(kind.value, label, prime) for kind, label, prime in default_primes()],
    )


_RECORD_BODY = """
    record_id TEXT NOT NULL,
    dedupe_key TEXT NOT NULL,
    domain TEXT NOT NULL,
    subdomain TEXT NOT NULL,
    tags TEXT NOT NULL,
    tag_product TEXT NOT NULL,
    content TEXT NOT NULL,
    vector BYTEA,
    importance DOUBLE PRECISION NOT NULL,
    strength DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    accessed_at DOUBLE PRECISION NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    metadata TEXT NOT NULL DEFAULT '{}',
    instance_key TEXT,
    strength_at DOUBLE PRECISION,
    scope TEXT NOT NULL DEFAULT 'global'
"""

_CORE = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE primes (
        kind TEXT NOT NULL CHECK (kind IN ('domain', 'subdomain', 'tag')),
        label TEXT NOT NULL,
        prime BIGINT NOT NULL,
        PRIMARY KEY (kind, label),
        UNIQUE (kind, prime)
    )""",
    f"""CREATE TABLE records (
        id BIGSERIAL PRIMARY KEY,
        {_RECORD_BODY},
        domain_prime BIGINT,
        subdomain_prime BIGINT,
        tag_primes BIGINT[] NOT NULL DEFAULT '{{}}',
        lex TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', {folded("content")})) STORED,
        CHECK (importance BETWEEN 0 AND 1),
        CHECK (strength BETWEEN 0 AND 1),
        UNIQUE (record_id),
        UNIQUE (dedupe_key)
    )""",
    "CREATE INDEX records_scope ON records (scope, domain_prime, subdomain_prime)",
    "CREATE INDEX records_domain ON records (domain_prime, subdomain_prime)",
    "CREATE INDEX records_tags ON records USING gin (tag_primes)",
    "CREATE INDEX records_lex ON records USING gin (lex)",
    "CREATE INDEX records_updated ON records (updated_at)",
    # The labels' primes, whatever statement writes the row (the archive's
    # restores included). A label always has its prime before a record names it.
    """CREATE FUNCTION records_primes() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.domain_prime := (SELECT prime FROM primes
                             WHERE kind = 'domain' AND label = NEW.domain);
        NEW.subdomain_prime := (SELECT prime FROM primes
                                WHERE kind = 'subdomain' AND label = NEW.subdomain);
        NEW.tag_primes := ARRAY(
            SELECT p.prime FROM jsonb_array_elements_text(NEW.tags::jsonb) AS t(label)
            JOIN primes AS p ON p.kind = 'tag' AND p.label = t.label);
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER records_primes BEFORE INSERT OR UPDATE OF domain, subdomain, tags
        ON records FOR EACH ROW EXECUTE FUNCTION records_primes()""",
    # The change log: every server's caches catch up from it.
    "CREATE TABLE changes (seq BIGSERIAL PRIMARY KEY, record_id TEXT NOT NULL)",
    """CREATE FUNCTION records_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            INSERT INTO changes (record_id) VALUES (OLD.record_id);
            RETURN OLD;
        END IF;
        INSERT INTO changes (record_id) VALUES (NEW.record_id);
        RETURN NEW;
    END $$""",
    """CREATE TRIGGER records_change AFTER INSERT OR UPDATE OR DELETE ON records
        FOR EACH ROW EXECUTE FUNCTION records_change()""",
    f"""CREATE TABLE archive (
        seq BIGSERIAL PRIMARY KEY,
        reason TEXT NOT NULL CHECK (reason IN ('pruned', 'folded', 'forgotten', 'replaced')),
        detail TEXT NOT NULL,
        folded_into TEXT,
        archived_at DOUBLE PRECISION NOT NULL,
        {_RECORD_BODY}
    )""",
    "CREATE INDEX archive_record ON archive (record_id)",
    "CREATE INDEX archive_reason ON archive (reason, folded_into)",
    "CREATE TABLE fold_marks (record_id TEXT PRIMARY KEY, prune_at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX fold_marks_prune_at ON fold_marks (prune_at)",
)

_TOKENS = (
    """CREATE TABLE tokens (
        id BIGSERIAL PRIMARY KEY,
        name TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        scopes TEXT NOT NULL,
        read_only INTEGER NOT NULL CHECK (read_only IN (0, 1)),
        created_at DOUBLE PRECISION NOT NULL,
        revoked_at DOUBLE PRECISION
    )""",
    "CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at IS NULL",
)

#: A record may belong to a session (a conversation); records from before have
#: none. A text query reads its hits' neighbours of the same session by
#: (session, id), which the partial index answers without reading the others.
_SESSIONS = (
    "ALTER TABLE records ADD COLUMN session TEXT",
    "ALTER TABLE archive ADD COLUMN session TEXT",
    "CREATE INDEX records_session ON records (session, id) WHERE session IS NOT NULL",
)

#: Groups of records that folds keep apart (SQLite's migration 12): no fold
#: merges two records of one group; a row names one member of one group.
_FOLD_APART = (
    """CREATE TABLE fold_apart (
        set_id BIGINT NOT NULL,
        record_id TEXT NOT NULL,
        PRIMARY KEY (set_id, record_id)
    )""",
    "CREATE INDEX fold_apart_record ON fold_apart (record_id)",
)

#: Closed versions and stale memories about code are archived too (SQLite's
#: migration 13): the archive's reasons gain ``superseded`` and ``stale``.
_ARCHIVE_REASONS = (
    "ALTER TABLE archive DROP CONSTRAINT archive_reason_check",
    """ALTER TABLE archive ADD CONSTRAINT archive_reason_check CHECK (reason IN
        ('pruned', 'folded', 'forgotten', 'replaced', 'superseded', 'stale'))""",
)

#: When each memory that cites code was last verified (SQLite's migration 14),
#: and the records that cite code, indexed apart for a fold's expiry.
_CITE_CHECKS = (
    """CREATE TABLE cite_checks (
        record_id TEXT PRIMARY KEY,
        verified_at DOUBLE PRECISION NOT NULL
    )""",
    """CREATE INDEX records_cites ON records (record_id, accessed_at)
        WHERE metadata LIKE '%"cites"%'""",
)

#: Salience in the database's own order (:mod:`.pg_decay`): each record's decay
#: class and key, generated from the default decay policy, and the index that
#: reads the best of each class first. It carries the columns the gates test,
#: so that a scan past the records of other tags reads the index alone.
_DECAY_ORDER = (
    "ALTER TABLE records ADD COLUMN salience_class INTEGER "
    f"GENERATED ALWAYS AS ({class_sql(STORE_DECAY)}) STORED",
    "ALTER TABLE records ADD COLUMN salience_key DOUBLE PRECISION "
    f"GENERATED ALWAYS AS ({key_sql(STORE_DECAY)}) STORED",
    "CREATE INDEX records_salience ON records "
    "(salience_class, salience_key DESC, updated_at DESC, id) "
    "INCLUDE (record_id, scope, domain_prime, subdomain_prime, tag_primes)",
)

PG_MIGRATIONS: tuple[PgMigration, ...] = (
    PgMigration(1, "create_tables", _CORE, _seed_primes),
    PgMigration(2, "create_tokens", _TOKENS),
    PgMigration(3, "add_sessions", _SESSIONS),
    PgMigration(4, "create_fold_apart", _FOLD_APART),
    PgMigration(5, "archive_superseded_and_stale", _ARCHIVE_REASONS),
    PgMigration(6, "create_cite_checks", _CITE_CHECKS),
    PgMigration(7, "order_salience_by_decay", _DECAY_ORDER),
)


def latest_pg_version() -> int:
    """The newest PostgreSQL schema version this code knows."""
    return max(m.version for m in PG_MIGRATIONS)
