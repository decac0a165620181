"""Storing what hooks spooled: one engine process for a turn's captures.

A hook that ends a turn (stop, compaction, session end) starts a drain in a
process of its own, detached from the host, and returns at once; the drain
claims the spool's captures (:meth:`.Spool.claim`), turns them into memories
(:func:`.keep.memories`), leaves out what the store already holds word for
word, stores the rest in one ``store_many`` per drain, and only then deletes
the captures from the spool. A memory cites the files its turn edited
(:func:`.keep.memories`) that exist when it is stored and that the engine
accepts (:func:`checked_cites`): one missing or outside file never costs the
turn its memory. If storing fails, the captures go back to the
spool for the next drain; nothing is lost. A drain that finds nothing to do
exits at once, and one never outlives its work: there is no daemon.

``python -m prime_memory_folding.capture.drain`` runs one, as the hooks do.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core import citations
from ..core.places import default_store
from ..errors import InvalidInput, StoreError
from ..storage import is_postgres_url
from .keep import memories
from .log import HookLog
from .spool import Spool, spool_path

__all__ = ["Drained", "checked_cites", "drain", "main"]

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


def _uncited(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in ("cites", "repo")}


def checked_cites(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with only the citations the engine accepts, or none.

    The whole list is checked as the engine checks it (:func:`.citations.cite`);
    when that refuses, each citation alone, and those refused (a file deleted
    since, a path outside the repository, a link out of it) are left out.
    """
    cites, repo = item.get("cites"), item.get("repo")
    if not cites or not repo:
        return _uncited(item)
    root = Path(str(repo))
    try:
        citations.cite(root, cites)
        return item
    except (InvalidInput, OSError):
        pass
    kept = []
    for cite in cites:
        try:
            citations.cite(root, [cite])
        except (InvalidInput, OSError):
            continue
        kept.append(cite)
    return {**item, "cites": kept} if kept else _uncited(item)


def _store(engine: Writer, items: list[dict[str, Any]]) -> None:
    """``store_many`` of ``items``; again without citations if the engine refused the batch.

    A file may change between the check and the store: the turn is kept without them.
    """
    checked = [checked_cites(item) for item in items]
    try:
        engine.store_many(checked)
    except InvalidInput:
        if not any("cites" in item for item in checked):
            raise
        engine.store_many([_uncited(item) for item in checked])


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
                    _store(engine, unique)
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
