"""Connections to PostgreSQL: URLs, connection options, errors, and SQL as SQLite writes it.

What :class:`~.postgres.PostgresStorage` needs around psycopg that is not
about its tables: a URL without its password for messages, how long a call
waits for a connection, libpq's options (keepalives, an application name),
which errors mean a lost connection, and the adapter that lets SQL written for
SQLite (``?`` placeholders) run on a pooled connection.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import StoreError

__all__ = [
    "DEFAULT_TIMEOUT",
    "Rows",
    "Runner",
    "SqlConnection",
    "connect_options",
    "connection_lost",
    "qmark_to_format",
    "reason_of",
    "redact",
    "secrets_of",
    "store_error",
    "wait_limit",
    "without_secrets",
    "writes",
]

#: Seconds a call waits for a connection, unless the URL sets ``connect_timeout``.
DEFAULT_TIMEOUT = 10.0


class Runner(Protocol):
    """Runs statements with ``%s`` placeholders and reads their rows."""

    def run(self, sql: str, params: Sequence[Any] = ()) -> Rows: ...
    def run_many(self, sql: str, seq: Sequence[Sequence[Any]]) -> Rows: ...


#: Query parameters of a libpq URL that hold a secret (``sslpassword`` unlocks a client key).
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def redact(url: str) -> str:
    """The URL with every password masked as ``***``, for messages and logs.

    Both places a libpq URL can hold one are masked: the user information
    (``user:pw@host``) and the query (``?password=pw``, ``?sslpassword=pw``;
    libpq decodes a percent-encoded parameter name, so this does too).
    ``passfile`` and ``service`` name files, not secrets, and stay.
    """
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, hosts = netloc.rsplit("@", 1)
        if ":" in userinfo:
            netloc = f"{userinfo.split(':', 1)[0]}:***@{hosts}"
    query = "&".join(
        f"{item.partition('=')[0]}=***" if _secret_parameter(item) else item
        for item in parts.query.split("&")
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secrets_of(url: str) -> list[str]:
    """The passwords a URL holds, as written and percent-decoded, longest first."""
    parts = urlsplit(url)
    found: set[str] = set()
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    if ":" in userinfo:
        found.add(userinfo.split(":", 1)[1])
    for item in parts.query.split("&"):
        if _secret_parameter(item):
            found.add(item.partition("=")[2])
    found |= {unquote(secret) for secret in found}
    return sorted((secret for secret in found if secret), key=len, reverse=True)


def without_secrets(text: str, url: str) -> str:
    """``text`` with every password of ``url`` masked (libpq quotes a malformed URL's parts)."""
    for secret in secrets_of(url):
        text = text.replace(secret, "***")
    return text


def _secret_parameter(item: str) -> bool:
    return unquote(item.partition("=")[0]).strip().lower() in SECRET_PARAMETERS


def qmark_to_format(sql: str) -> str:
    """SQLite's ``?`` placeholders as psycopg's ``%s``, outside string literals."""
    out: list[str] = []
    quoted = False
    for char in sql:
        if char == "'":
            quoted = not quoted
        if char == "%":
            out.append("%%")
        elif char == "?" and not quoted:
            out.append("%s")
        else:
            out.append(char)
    return "".join(out)


def wait_limit(url: str) -> float:
    """Seconds a call waits for a connection: the URL's ``connect_timeout``, else the default."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(url).get("connect_timeout")
    try:
        seconds = float(given) if given is not None else DEFAULT_TIMEOUT
    except ValueError:
        raise StoreError(
            f"connect_timeout={given!r} in the PostgreSQL URL is not a number of seconds"
        ) from None
    # libpq reads 0 (or less) as "wait forever"; a call must not.
    return seconds if seconds > 0 else DEFAULT_TIMEOUT


def connect_options(url: str, timeout: float) -> dict[str, Any]:
    """libpq settings the URL leaves out: bounded waits on a server that is gone.

    A connection attempt gives up after ``timeout`` seconds, TCP keepalives
    find a peer that vanished without closing the connection within about a
    minute, and sessions show up as ``prime-memory`` in ``pg_stat_activity``.
    Whatever the URL sets wins.
    """
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(url)
    defaults: dict[str, Any] = {
        "connect_timeout": max(2, math.ceil(timeout)),
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
        "fallback_application_name": "prime-memory",
    }
    return {key: value for key, value in defaults.items() if key not in given}


def connection_lost(exc: BaseException) -> bool:
    """Whether a psycopg error means the connection is gone (not a failed statement).

    psycopg reports a broken socket without an SQLSTATE; the server, ending a
    session, sends class 08 (connection exception) or 57P01-57P03 (an
    administrator's command, a crash, a server starting up or shutting down).
    """
    import psycopg

    if isinstance(exc, psycopg.InterfaceError):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in {"57P01", "57P02", "57P03"}


def reason_of(exc: BaseException, url: str = "") -> str:
    """An error's message on one line, without the passwords of ``url`` (libpq may quote them)."""
    said = " ".join(str(exc).split()) or type(exc).__name__
    return without_secrets(said, url) if url else said


def store_error(
    exc: Exception, path: str, timeout: float, *, maybe_written: bool = False
) -> StoreError:
    """A psycopg or pool error as the store error a caller can act on.

    ``path`` names the store (without its password), ``timeout`` is how long a
    call waits for a connection.

    ``maybe_written``: the connection may have been lost after the database
    applied the write (while it committed), so the message says so.
    """
    import psycopg

    said = reason_of(exc)
    if type(exc).__name__ == "PoolClosed":
        return StoreError(f"store {path} is closed; open it again")
    if type(exc).__name__ == "PoolTimeout":
        return StoreError(
            f"no connection to PostgreSQL at {path} within {timeout:g} s "
            f"({said}): the database does not answer, or every pooled connection is "
            "busy; nothing of this call was written; retry once the database answers"
        )
    if connection_lost(exc):
        if maybe_written:
            return StoreError(
                f"lost the connection to PostgreSQL at {path} ({said}) as the write "
                "was committed: it may or may not have been saved; look before repeating it"
            )
        return StoreError(
            f"lost the connection to PostgreSQL at {path} ({said}); "
            "nothing of this call was written; retry once the database answers"
        )
    if isinstance(exc, psycopg.errors.UniqueViolation):
        return StoreError(f"store {path}: a write collided with another ({said})")
    return StoreError(f"store {path}: {said}")


def writes(sql: str) -> bool:
    """Whether a statement may change the database (anything but a plain SELECT)."""
    return not sql.lstrip()[:6].upper().startswith("SELECT")


class Rows:
    """A finished statement's rows, read before the connection went back to the pool."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())


class SqlConnection:
    """The store's connection as SQL modules written for SQLite see it.

    ``execute`` and ``executemany`` take ``?`` placeholders; results are read
    in full before they return. Inside :meth:`PostgresStorage.transaction`
    they run on its connection, outside it each in a transaction of its own.
    """

    def __init__(self, storage: Runner) -> None:
        self._storage = storage

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows:
        return self._storage.run(qmark_to_format(sql), params)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> Rows:
        return self._storage.run_many(qmark_to_format(sql), list(seq))
