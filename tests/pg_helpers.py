"""PostgreSQL for tests: a database of the run's own, a fresh schema per store.

The server comes from ``PRIME_MEMORY_TEST_PG`` (a libpq URL) when set, else the
machine's service at 127.0.0.1:5432. The run creates one database with a
random name and drops it at the end; each store is a schema of its own in it
(its URL sets ``search_path``), which is far quicker to make than a database.
Without a server a PostgreSQL test skips, except where ``CI`` is set: there it
fails.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, urlsplit, urlunsplit

PG_ENV = "PRIME_MEMORY_TEST_PG"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def server_url() -> str:
    """The test server's URL (its maintenance database)."""
    return os.environ.get(PG_ENV, "").strip() or DEFAULT_SERVER


def with_database(url: str, database: str) -> str:
    """``url`` pointing at another database on the same server."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, ""))


def with_schema(url: str, schema: str) -> str:
    """``url`` whose connections put ``schema`` first on the search path.

    ``public`` follows it, where a database keeps its extensions (pgvector).
    """
    joiner = "&" if urlsplit(url).query else "?"
    return f"{url}{joiner}options={quote(f'-csearch_path={schema},public')}"


def unavailable() -> str | None:
    """Why the test server cannot be used, or None when it answers."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    try:
        with psycopg.connect(server_url(), connect_timeout=5):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL at {server_url()} does not answer: {str(exc).strip()}"


@contextmanager
def scratch_database(server: str | None = None) -> Iterator[str]:
    """A new database with a random name on ``server`` (default: the test server),
    dropped afterwards; yields its URL."""
    import psycopg

    server = server or server_url()
    name = "pmf_test_" + secrets.token_hex(6)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def new_schema(database_url: str) -> str:
    """A new empty schema in the database; returns a store URL that uses it."""
    import psycopg

    schema = "s_" + secrets.token_hex(6)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return with_schema(database_url, schema)
