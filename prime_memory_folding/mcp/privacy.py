"""What an MCP client may learn: nothing of where the store is, nothing beyond its token.

Two rules of docs/security.md hold here, for every tool, resource and prompt:

- **The location never leaks.** The engine names the store in its messages by
  its ``display_path``, which the server sets to :data:`STORE_NAME`. A store
  error (a lost connection, a locked file, a damaged store) reaches the client
  as a fixed sentence that says what to do, chosen by :func:`client_error`;
  its full text, password masked, goes to the server's log. Every other
  message passes through :class:`Location`, which masks whatever names the
  store that is still in it: its path, URL, host, port, user, database,
  password, password or service file.
- **No existence oracle.** A record outside the request's token answers as a
  record that does not exist, with the same error and message
  (:func:`unknown_record`), after the same single look-up.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from mcp.server.mcpserver.exceptions import ToolError

from ..errors import NotFound, PrimeMemoryError, StoreError

if TYPE_CHECKING:
    from ..engine.facade import MemoryEngine

__all__ = ["STORE_NAME", "Location", "client_error", "unknown_record"]

logger = logging.getLogger("prime_memory_folding.mcp.server")

#: How messages to MCP clients name the store.
STORE_NAME = "the store"

#: libpq settings that say where a store is or who logs in to it.
_CONNINFO_KEYS = (
    "host",
    "hostaddr",
    "port",
    "user",
    "dbname",
    "password",
    "passfile",
    "service",
    "sslkey",
    "sslcert",
    "sslrootcert",
    "sslcrl",
    "sslpassword",
)
#: The environment variables libpq reads for the same.
_PG_ENV = (
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGUSER",
    "PGDATABASE",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSERVICE",
    "PGSERVICEFILE",
)

#: What a client hears of a store error, by a phrase of the full message; the
#: first that matches wins. Each says what to do without saying where the store is.
_STORE_TROUBLE = (
    (
        ("may or may not have been saved",),
        "the connection to the store was lost as this write was committed: it may or may not "
        "have been saved; look before repeating it",
    ),
    (
        ("lost the connection",),
        "lost the connection to the store; nothing of this call was written; retry once it answers",
    ),
    (
        ("no connection to", "cannot connect", "does not answer"),
        "the store does not answer; nothing of this call was written; retry once it answers",
    ),
    (
        ("locked",),
        "the store is busy with another writer; nothing was written; retry in a moment",
    ),
    (
        ("collided",),
        "this write collided with another at the same moment; nothing was written; retry",
    ),
    (
        ("schema version",),
        "the store was written by a newer version of prime-memory-folding; the server's "
        "operator must upgrade the server",
    ),
    (
        ("disk is full",),
        "the store's disk is full; nothing was written; the server's operator must free space",
    ),
    (
        ("is closed",),
        "the store is closed; the server's operator must restart the server",
    ),
)
_STORE_FAILED = (
    "the store could not do this (the server's log says why); retry, and tell the server's "
    "operator if it keeps failing"
)


class Location:
    """Whatever names where a store is, to be masked in what a client sees.

    Built from the engine once it is open: the path it shows, its URL, the
    file's absolute and real paths, the URL's libpq settings and those in the
    environment, and on PostgreSQL the database, user and server address that
    the connection really reached (a service file may name them).
    """

    def __init__(self, names: Iterable[str] = (), ports: Iterable[str] = ()) -> None:
        # A name of one or two characters would mask letters of every message; the
        # location never reaches a message in pieces that short (the engine's name
        # for the store is STORE_NAME), so those are left alone.
        kept = {name.strip() for name in names if len(name.strip()) >= 3}
        kept.discard(STORE_NAME)
        # Longest first, so that a URL goes whole before its host is looked for.
        ordered = sorted(kept, key=len, reverse=True)
        parts = [
            rf"(?<![\w.-]){re.escape(name)}(?![\w-])"
            if re.fullmatch(r"[\w.-]+", name)
            else re.escape(name)
            for name in ordered
        ]
        parts += [rf"(?:(?<=:)|(?<=port )){re.escape(port)}(?!\d)" for port in set(ports) if port]
        self._pattern = re.compile("|".join(parts)) if parts else None

    @classmethod
    def of(cls, engine: MemoryEngine) -> Location:
        """The location of ``engine``'s store."""
        storage = engine.storage
        names: set[str] = {engine.path, storage.path}
        ports: set[str] = set()
        url = getattr(storage, "url", None)
        if isinstance(url, str):
            names.add(url)
            names |= _conninfo(url, ports)
            names |= _server_side(storage)
        elif storage.path not in ("", ":memory:"):
            for path in (storage.path, os.path.abspath(storage.path)):
                names.add(path)
                names.add(os.path.realpath(path))
        for key in _PG_ENV:
            value = os.environ.get(key, "")
            if key == "PGPORT":
                ports.add(value)
            else:
                names.add(value)
        return cls(names, ports)

    def scrub(self, text: str) -> str:
        """``text`` with every name of the location replaced by :data:`STORE_NAME`."""
        if self._pattern is None:
            return text
        return self._pattern.sub(STORE_NAME, text)


def _conninfo(url: str, ports: set[str]) -> set[str]:
    """The values of the URL's libpq settings that name the location."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(url)
    except Exception:
        return set()
    names: set[str] = set()
    for key in _CONNINFO_KEYS:
        value = str(given.get(key) or "")
        for item in value.split(","):  # several hosts and ports
            if key == "port":
                ports.add(item.strip())
            else:
                names.add(item)
    return names


def _server_side(storage: object) -> set[str]:
    """The database, user and server address a PostgreSQL connection reached."""
    run = getattr(storage, "run", None)
    if run is None:
        return set()
    try:
        row = run(
            "SELECT current_database(), current_user, host(inet_server_addr()), "
            "inet_server_port()::text"
        ).fetchone()
    except Exception:
        logger.debug("could not ask the database where it is", exc_info=True)
        return set()
    return {str(value) for value in row or () if value is not None}


def client_error(exc: PrimeMemoryError, location: Location | None) -> ToolError:
    """``exc`` as the tool error a client gets: the location nowhere in it."""
    kind = type(exc).__name__
    if isinstance(exc, StoreError):
        logger.warning("store error: %s", exc)
        said = str(exc)
        for phrases, sentence in _STORE_TROUBLE:
            if any(phrase in said for phrase in phrases):
                return ToolError(f"{kind}: {sentence}")
        return ToolError(f"{kind}: {_STORE_FAILED}")
    text = str(exc)
    if location is not None:
        text = location.scrub(text)
    return ToolError(f"{kind}: {text}")


def unknown_record(record_id: str) -> NotFound:
    """The error for a record that does not exist, or that the request may not see.

    Both answer alike, so that a client cannot tell a guess in another scope
    from a miss. ``record_id`` is the id parsed (lower case).
    """
    return NotFound(f"no record {record_id} in {STORE_NAME}")
