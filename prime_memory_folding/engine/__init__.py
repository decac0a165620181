"""The engine: the :class:`MemoryEngine` facade, its writes, reads, maintenance and views.

``from prime_memory_folding.engine import MemoryEngine`` loads the facade
(:mod:`.facade`) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .facade import MAX_LIMIT, MemoryEngine, default_store, default_store_path

__all__ = ["MAX_LIMIT", "MemoryEngine", "default_store", "default_store_path"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import facade

        return getattr(facade, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
