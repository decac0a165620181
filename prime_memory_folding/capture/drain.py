"""Storing what hooks spooled: one engine process for a turn's captures.

A hook that ends a turn (stop, compaction, session end) starts a drain in a
process of its own, detached from the host, and returns at once; the drain
claims the spool's captures (:meth:`.Spool.claim`), turns them into memories
(:func:`.keep.memories`), leaves out what the store already holds word for
word, stores the rest in one ``store_many`` per drain, and only then deletes
the captures from the spool. If storing fails, the captures go back to the
spool for the next drain; nothing is lost. A drain that finds nothing to do
exits at once, and one never outlives its work: there is no daemon.

``python -m prime_memory_folding.capture.drain`` runs one, as the hooks do.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.places import default_store
from ..errors import StoreError
from ..storage import is_postgres_url
from .keep import memories
from .log import HookLog
from .spool import Spool, spool_path

__all__ = ["Drained", "drain", "main"]

#: A drain stops after this many rounds of claiming, even if hooks keep adding.
MAX_ROUNDS = 20


class Writer(Protocol):
    """What a drain needs of an engine."""

    def store_many(self, items: Any) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Drained:
    """What one drain did: captures claimed, memories stored, and left out as already held."""

    captures: int
    stored: int
    already: int


def _already_held(store: str, items: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """``(scope, content)`` of the items an SQLite store already holds word for word."""
    if is_postgres_url(store):
        return set()  # storing the same again only reinforces it
    from ..storage.sqlite_peek import Peek

    held: set[tuple[str, str]] = set()
    try:
        with Peek(store) as peek:
            for scope in {item["scope"] for item in items}:
                contents = [item["content"] for item in items if item["scope"] == scope]
                held.update((scope, content) for content in peek.stored(scope, contents))
    except StoreError:  # a store not made yet holds nothing
        return set()
    return held


def drain(
    spool: Spool,
    *,
    store: str | None = None,
    open_engine: Callable[[str], Writer] | None = None,
    clock: Callable[[], float] = time.time,
) -> Drained:
    """Store every capture the spool holds; see the module docstring.

    Raises:
        Exception: whatever opening or writing the store raised, after the
            captures were given back to the spool.
    """
    store = default_store() if store is None else store
    captures = stored = already = 0
    engine: Writer | None = None
    try:
        for _ in range(MAX_ROUNDS):
            claimed = spool.claim(clock())
            if not claimed:
                break
            captures += len(claimed)
            try:
                items = memories(claimed)
                held = _already_held(store, items)
                fresh = [item for item in items if (item["scope"], item["content"]) not in held]
                already += len(items) - len(fresh)
                # Within one drain, the same text twice is one memory.
                unique = list({(i["scope"], i["content"]): i for i in fresh}.values())
                if unique:
                    if engine is None:
                        engine = (open_engine or _open_engine)(store)
                    engine.store_many(unique)
                    stored += len(unique)
            except BaseException:
                spool.release([c.id for c in claimed])
                raise
            spool.done([c.id for c in claimed])
    finally:
        if engine is not None:
            engine.close()
    return Drained(captures, stored, already)


def _open_engine(store: str) -> Writer:
    from ..engine.facade import MemoryEngine

    return MemoryEngine(store, scope="global")


def main(log: HookLog | None = None) -> int:
    """Drain the default spool, logging to the hooks' log; always exits 0."""
    log = log or HookLog()
    try:
        with Spool(spool_path()) as spool:
            done = drain(spool)
        if done.captures:
            log.write(
                "drain",
                f"stored {done.stored} of {done.captures} captures ({done.already} already held)",
            )
    except BaseException as exc:  # a drain must never leave a trace but the log
        log.failure("drain", exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
