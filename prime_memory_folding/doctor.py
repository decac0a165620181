"""Health checks for a store: can it be opened, is it intact, and do concurrent writers survive.

The write self-test never touches the store itself: it copies the store with
SQLite's backup API into a temporary folder, lets several processes write to
the copy at once, and counts the records that survived.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import PrimeMemoryError

__all__ = ["Check", "check_store", "self_test"]

SELF_TEST_DOMAIN = "doctor_self_test"


@dataclass(frozen=True, slots=True)
class Check:
    """One health check: its name, whether it passed, and what was found."""

    name: str
    ok: bool
    detail: str


def check_store(
    path: str | os.PathLike[str],
    *,
    processes: int = 4,
    writes: int = 25,
    on_check: Callable[[Check], None] | None = None,
) -> list[Check]:
    """Run every check on the store at ``path``; stops early when it cannot be opened.

    A missing store is reported and not created. ``processes`` x ``writes``
    sizes the concurrent-write self-test; ``processes=0`` skips it.
    """
    from .engine import MemoryEngine
    from .storage import SQLiteStorage
    from .storage.migrations import latest_version

    checks: list[Check] = []

    def record(check: Check) -> None:
        checks.append(check)
        if on_check is not None:
            on_check(check)

    target = Path(path)
    if not target.exists():
        record(Check("store", False, f"no store at {target} yet; it is created on first store"))
        return checks
    try:
        engine = MemoryEngine(target)
    except PrimeMemoryError as exc:
        record(Check("opens", False, str(exc)))
        return checks
    with engine:
        storage = engine.storage
        record(Check("opens", True, f"{storage.path} ({storage.size_bytes():,} bytes)"))
        if isinstance(storage, SQLiteStorage):
            rows = [str(r[0]) for r in storage.db.execute("PRAGMA integrity_check")]
            intact = rows == ["ok"]
            record(Check("integrity", intact, "ok" if intact else "; ".join(rows[:5])))
            mode = str(storage.db.execute("PRAGMA journal_mode").fetchone()[0])
            record(Check("wal mode", mode.lower() == "wal", f"journal_mode={mode}"))
        version = storage.schema_version()
        newest = latest_version()
        record(
            Check(
                "schema",
                version == newest,
                f"version {version} of {newest}"
                + ("" if version == newest else "; open it once with this version to migrate"),
            )
        )
        record(Check("records", True, f"{storage.count():,}"))
    if processes > 0:
        record(self_test(target, processes=processes, writes=writes))
    return checks


def self_test(path: str | os.PathLike[str], *, processes: int = 4, writes: int = 25) -> Check:
    """Copy the store, let ``processes`` processes store ``writes`` records each, count them."""
    from .engine import MemoryEngine

    with tempfile.TemporaryDirectory(prefix="prime-memory-doctor-") as folder:
        copy = Path(folder) / "copy.db"
        source = sqlite3.connect(path)
        target = sqlite3.connect(copy)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
        with MemoryEngine(copy) as engine:
            before = len(engine.match_ids(domain=SELF_TEST_DOMAIN))
        context = multiprocessing.get_context("spawn")
        workers = [
            context.Process(target=_write_many, args=(str(copy), worker, writes))
            for worker in range(processes)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        failed = [w.exitcode for w in workers if w.exitcode != 0]
        with MemoryEngine(copy) as engine:
            survivors = len(engine.match_ids(domain=SELF_TEST_DOMAIN)) - before
    expected = processes * writes
    detail = f"{processes} processes x {writes} writes: {survivors}/{expected} survived"
    if failed:
        detail += f"; {len(failed)} writer(s) failed"
    return Check("concurrent writes", survivors == expected and not failed, detail)


def _write_many(path: str, worker: int, writes: int) -> None:
    from .engine import MemoryEngine

    with MemoryEngine(path) as engine:
        for n in range(writes):
            engine.store(
                f"self-test write {n} from worker {worker}",
                domain=SELF_TEST_DOMAIN,
                tags=[f"worker_{worker}"],
            )
