"""The exception tree of Prime Memory Folding.

Every error the engine raises on purpose derives from :class:`PrimeMemoryError`,
so a caller can catch one class at the edge::

    PrimeMemoryError
    ├── InvalidInput            (also a ValueError) bad arguments; nothing was written
    │   ├── InvalidRecordId     a record id that is not 32 hex digits
    │   └── DimensionMismatch   a vector that does not fit the store's embedding space
    ├── NotFound                (also a KeyError) no record with that id
    ├── NotAvailable            a feature that this store or install cannot serve
    ├── EmbeddingError          an embedding backend failed; names the setting to fix
    └── StoreError              the store file cannot be used as it is
        ├── StoreLocked         another connection held the write lock too long
        └── SchemaTooNew        the store was written by a newer version

Messages say what was wrong and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "DimensionMismatch",
    "EmbeddingError",
    "InvalidInput",
    "InvalidRecordId",
    "NotAvailable",
    "NotFound",
    "PrimeMemoryError",
    "SchemaTooNew",
    "StoreError",
    "StoreLocked",
]


class PrimeMemoryError(Exception):
    """Base class of every error raised by the engine."""


class InvalidInput(PrimeMemoryError, ValueError):
    """An argument was rejected; the store was not changed."""


class InvalidRecordId(InvalidInput):
    """A record id is not 32 hexadecimal digits."""


class DimensionMismatch(InvalidInput):
    """A vector's dimension does not fit the store's embedding space."""


class NotFound(PrimeMemoryError, KeyError):
    """No record has the requested id."""

    def __str__(self) -> str:
        # KeyError quotes its argument; a message reads better plain.
        return str(self.args[0]) if self.args else "not found"


class NotAvailable(PrimeMemoryError):
    """The operation needs a capability this store or install does not have."""


class EmbeddingError(PrimeMemoryError):
    """An embedding backend could not produce vectors."""


class StoreError(PrimeMemoryError):
    """The store file cannot be opened or written as it is."""


class StoreLocked(StoreError):
    """The store stayed locked by another connection past the busy timeout."""


class SchemaTooNew(StoreError):
    """The store's schema is newer than this version understands."""
