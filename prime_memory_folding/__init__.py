"""Prime Memory Folding: a local-first memory engine for AI agents and IDEs.

>>> from prime_memory_folding import MemoryEngine
>>> with MemoryEngine(":memory:") as memory:
...     _ = memory.store("We use SQLite in WAL mode", domain="decision", tags=["architecture"])
...     [hit.record.content for hit in memory.query(domain="decision", tags=["architecture"])]
['We use SQLite in WAL mode']

Heavy modules (numpy, the engine) load on first use, so importing the package
stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core.address import Encoded
from .core.citations import CitationState
from .core.records import (
    Chain,
    ChainLink,
    Hit,
    Record,
    Restatement,
    Stats,
    StoreResult,
    Vector,
    Version,
)
from .errors import (
    DimensionMismatch,
    EmbeddingError,
    InvalidInput,
    InvalidRecordId,
    NotAvailable,
    NotFound,
    PrimeMemoryError,
    SchemaTooNew,
    StoreError,
    StoreLocked,
)
from .recall.ranking import RankingSettings

if TYPE_CHECKING:
    from .core.filters import Filters
    from .engine.cite_check import CitationReport
    from .engine.facade import MemoryEngine, default_store_path
    from .fold.folding import FoldPolicy, FoldReport

__version__ = "0.2.0"

__all__ = [
    "Chain",
    "ChainLink",
    "CitationReport",
    "CitationState",
    "DimensionMismatch",
    "EmbeddingError",
    "Encoded",
    "Filters",
    "FoldPolicy",
    "FoldReport",
    "Hit",
    "InvalidInput",
    "InvalidRecordId",
    "MemoryEngine",
    "NotAvailable",
    "NotFound",
    "PrimeMemoryError",
    "RankingSettings",
    "Record",
    "Restatement",
    "SchemaTooNew",
    "Stats",
    "StoreError",
    "StoreLocked",
    "StoreResult",
    "Vector",
    "Version",
    "__version__",
    "default_store_path",
]

_LAZY = {"MemoryEngine", "default_store_path"}
_LAZY_FOLDING = {"FoldPolicy", "FoldReport"}
_LAZY_FILTERS = {"Filters"}
_LAZY_CITATIONS = {"CitationReport"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from .engine import facade as engine

        return getattr(engine, name)
    if name in _LAZY_FOLDING:
        from .fold import folding

        return getattr(folding, name)
    if name in _LAZY_FILTERS:
        from .core import filters

        return getattr(filters, name)
    if name in _LAZY_CITATIONS:
        from .engine import cite_check

        return getattr(cite_check, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
