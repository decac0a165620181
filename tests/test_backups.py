"""Whole backups: a pack keeps vectors, an import embeds what comes without them,
and stats and doctor count the records that have none, on both backends."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import InvalidInput, MemoryEngine
from prime_memory_folding.engine.doctor import check_store
from prime_memory_folding.transfer.packs import export_pack, import_pack

NOTES = [
    ("decision", "We use SQLite in WAL mode so readers never block the writer"),
    ("decision", "PostgreSQL is the shared backend for teams; SQLite stays the default"),
    ("decision", "Vectors are float32 blobs scored with numpy over one matrix"),
    ("decision", "The MCP server is a thin adapter over the engine facade"),
    ("decision", "Releases are tagged from main after the full suite passes"),
    ("decision", "Configuration lives in pyproject.toml and nowhere else"),
    ("decision", "Errors are one line that says what was wrong and what to do"),
    ("decision", "Migrations are named functions recorded in a table, never renumbered"),
    ("workflow", "Deploys run on Fridays after the staging smoke test"),
    ("workflow", "Run ruff check, ruff format and mypy before every commit"),
    ("workflow", "The nightly job rebuilds the search index at 02:00 UTC"),
    ("workflow", "Code review needs one approval from the owning team"),
    ("workflow", "Hotfixes branch from the last release tag, not from main"),
    ("workflow", "Benchmarks run on the dedicated machine, never on laptops"),
    ("workflow", "Database backups are exported every night and kept for thirty days"),
    ("workflow", "On-call hands over on Monday mornings with a written summary"),
    ("bug", "The flaky test is test_sync: it races the file watcher"),
    ("bug", "Importing a large CSV used to exhaust memory; it now streams rows"),
    ("bug", "The login page broke on Safari because of a date parsing difference"),
    ("bug", "Timezone offsets were dropped when parsing ISO dates without seconds"),
    ("bug", "The cache returned stale entries after a schema migration"),
    ("bug", "Unicode file names crashed the uploader on Windows"),
    ("bug", "A missing index made the dashboard query take twelve seconds"),
    ("bug", "The retry loop never gave up when the network was down"),
    ("preference", "Alice prefers tabs over spaces in Makefiles only"),
    ("preference", "Short commit messages in the imperative mood"),
    ("preference", "Type hints everywhere, checked with mypy in strict mode"),
    ("preference", "Plain pytest functions, no test classes"),
    ("preference", "Dark theme for the inspector pages"),
    ("preference", "Small pull requests, one concern each"),
    ("preference", "Logs in JSON lines so they can be grepped and parsed"),
    ("preference", "Prefer composition over inheritance in the storage layer"),
    ("fact", "The API rate limit is 600 requests per minute per token"),
    ("fact", "Customer data lives in the eu-west-1 region"),
    ("fact", "The payment provider sends webhooks with HMAC signatures"),
    ("fact", "The search service runs three replicas behind a load balancer"),
    ("fact", "Python 3.11 is the oldest supported version"),
    ("fact", "The design system uses an eight pixel grid"),
    ("fact", "Support tickets are answered within one business day"),
    ("fact", "The mobile app talks to the same REST API as the web client"),
]

QUERIES = [
    "which database do we use",
    "how are vectors stored",
    "when do we deploy",
    "what to run before committing",
    "flaky tests",
    "memory problems when importing files",
    "browser bugs",
    "date and timezone parsing",
    "cache problems",
    "slow dashboard",
    "network retries",
    "indentation preferences",
    "commit message style",
    "type checking",
    "testing style",
    "rate limits of the API",
    "where is customer data",
    "webhooks security",
    "supported python versions",
    "backups of the database",
]


def fill(engine: MemoryEngine) -> None:
    for n, (domain, content) in enumerate(NOTES):
        engine.store(content, domain=domain, tags=[f"topic_{n % 5}"], importance=0.3 + n / 100)


def top10(engine: MemoryEngine) -> list[list[str]]:
    return [[h.record.record_id for h in engine.query(q, limit=10)] for q in QUERIES]


@pytest.fixture
def embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled embedder, as a user has it."""
    monkeypatch.delenv("PRIME_MEMORY_EMBEDDER")


def round_trip(source: str, target: str, clock: Any, **export: Any) -> tuple[Any, Any]:
    with MemoryEngine(source, clock=clock) as engine:
        fill(engine)
        out = io.StringIO()
        export_pack(engine, out, **export)
        before = top10(engine)
    pack = Path(str(source) + ".jsonl") if "://" not in source else None
    pack = pack or Path(clock.folder) / "pack.jsonl"
    pack.write_text(out.getvalue(), encoding="utf-8")
    with MemoryEngine(target, clock=clock) as engine:
        report = import_pack(engine, pack)
        assert report.added == len(NOTES)
        assert engine.stats().without_vector == 0
        after = top10(engine)
    return before, after


@pytest.mark.usefixtures("embedding")
@pytest.mark.parametrize("vectors", [True, False])
def test_a_pack_imported_into_a_new_store_ranks_as_the_store_did(
    backend_store: str, another_store: str, clock: Any, tmp_path: Path, vectors: bool
) -> None:
    clock.folder = tmp_path
    before, after = round_trip(backend_store, another_store, clock, vectors=vectors)
    assert after == before
    assert all(len(ids) == 10 for ids in before)


def test_export_keeps_vectors_unless_told_not_to(engine: MemoryEngine) -> None:
    engine.store("A note with a vector", vector=[1.0, 0.0, 0.0])
    kept, dropped = io.StringIO(), io.StringIO()
    assert export_pack(engine, kept).vectors
    assert not export_pack(engine, dropped, vectors=False).vectors
    assert json.loads(kept.getvalue().splitlines()[1])["vector"] == [1.0, 0.0, 0.0]
    assert "vector" not in json.loads(dropped.getvalue().splitlines()[1])


@pytest.mark.usefixtures("embedding")
def test_a_pack_without_vectors_gets_them_from_the_stores_embedder(
    tmp_path: Path, clock: Any
) -> None:
    with MemoryEngine(tmp_path / "a.db", clock=clock, embedder="none") as engine:
        fill(engine)
        out = io.StringIO()
        export_pack(engine, out)
    pack = tmp_path / "bare.jsonl"
    pack.write_text(out.getvalue(), encoding="utf-8")
    with MemoryEngine(tmp_path / "b.db", clock=clock) as engine:
        import_pack(engine, pack)
        summary = engine.stats()
        assert summary.without_vector == 0
        assert summary.embedding_space is not None
    with MemoryEngine(tmp_path / "c.db", clock=clock) as engine:
        import_pack(engine, pack, embed=False)
        assert engine.stats().without_vector == len(NOTES)


def test_without_embedding_an_import_leaves_records_as_they_came(
    tmp_path: Path, clock: Any
) -> None:
    with MemoryEngine(tmp_path / "a.db", clock=clock) as engine:
        fill(engine)
        out = io.StringIO()
        export_pack(engine, out)
    pack = tmp_path / "bare.jsonl"
    pack.write_text(out.getvalue(), encoding="utf-8")
    with MemoryEngine(tmp_path / "b.db", clock=clock) as engine:
        assert import_pack(engine, pack).added == len(NOTES)
        summary = engine.stats()
        assert summary.without_vector == len(NOTES)
        assert summary.embedding_space is None


def test_a_custom_space_is_never_re_embedded(
    tmp_path: Path, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryEngine(tmp_path / "a.db", clock=clock) as engine:
        engine.store("with a vector", vector=[1.0, 0.0])
        engine.store("without one")
        out = io.StringIO()
        export_pack(engine, out)
    pack = tmp_path / "mixed.jsonl"
    pack.write_text(out.getvalue(), encoding="utf-8")
    monkeypatch.delenv("PRIME_MEMORY_EMBEDDER")
    with MemoryEngine(tmp_path / "b.db", clock=clock, embedder="none") as engine:
        import_pack(engine, pack)
        summary = engine.stats()
        assert summary.embedding_space == "custom:2"
        assert summary.without_vector == 1


def test_stats_count_records_without_a_vector_per_scope(
    backend_engine: MemoryEngine,
) -> None:
    backend_engine.store("one with", vector=[1.0, 0.0], scope="global")
    backend_engine.store("one without", scope="global")
    backend_engine.store("another without", scope="user:alice")
    assert backend_engine.stats().without_vector == 2
    assert backend_engine.stats(["user:alice"]).without_vector == 1
    assert backend_engine.stats(["global"]).without_vector == 1


def checks_of(target: str, monkeypatch: pytest.MonkeyPatch, embedder: str | None) -> dict[str, Any]:
    if embedder is None:
        monkeypatch.delenv("PRIME_MEMORY_EMBEDDER", raising=False)
    else:
        monkeypatch.setenv("PRIME_MEMORY_EMBEDDER", embedder)
    return {check.name: check for check in check_store(target, processes=0)}


def test_doctor_names_reembed_when_records_have_no_vector(
    backend_store: str, monkeypatch: pytest.MonkeyPatch, clock: Any
) -> None:
    with MemoryEngine(backend_store, clock=clock) as engine:
        fill(engine)
    off = checks_of(backend_store, monkeypatch, "none")
    assert off["vectors"].ok and "embedding is off" in off["vectors"].detail
    on = checks_of(backend_store, monkeypatch, None)
    assert not on["vectors"].ok
    assert f"{len(NOTES)} of {len(NOTES)} records have no vector" in on["vectors"].detail
    assert "prime-memory reembed" in on["vectors"].detail
    with MemoryEngine(backend_store, clock=clock) as engine:
        engine.reembed()
    healed = checks_of(backend_store, monkeypatch, None)
    assert healed["vectors"].ok and all(check.ok for check in healed.values())


def test_doctor_on_postgresql_runs_what_applies_and_says_what_does_not(
    pg_url: str, clock: Any
) -> None:
    with MemoryEngine(pg_url, clock=clock) as engine:
        engine.store("a note", domain="decision")
    checks = {check.name: check for check in check_store(pg_url)}
    assert list(checks) == [
        "opens",
        "integrity",
        "wal mode",
        "concurrent writes",
        "schema",
        "embedding",
        "records",
        "vectors",
    ]
    assert all(check.ok for check in checks.values())
    for name in ("integrity", "wal mode", "concurrent writes"):
        assert checks[name].detail.startswith("does not apply to PostgreSQL")
    assert checks["records"].detail == "1"
    assert "read-only" in checks["opens"].detail


def test_doctor_on_an_unreachable_postgresql_fails_in_one_line() -> None:
    url = "postgresql://nobody@127.0.0.1:1/nothing?connect_timeout=2"
    (check,) = check_store(url)
    assert check.name == "opens" and not check.ok
    assert "\n" not in check.detail and "127.0.0.1" in check.detail


def test_the_mcp_stats_count_records_without_a_vector(engine: MemoryEngine) -> None:
    from prime_memory_folding.mcp.models import stats_output

    engine.store("one with", vector=[1.0, 0.0])
    engine.store("one without")
    assert stats_output(engine.stats(), engine.whoami()).without_vector == 1


@pytest.mark.usefixtures("embedding")
def test_an_import_embeds_only_what_came_without_a_vector(tmp_path: Path, clock: Any) -> None:
    with MemoryEngine(tmp_path / "bare.db", clock=clock, embedder="none") as engine:
        engine.store("Deploys go out through the release train on Tuesdays.", domain="workflow")
        out = io.StringIO()
        export_pack(engine, out)
    pack = tmp_path / "bare.jsonl"
    pack.write_text(out.getvalue(), encoding="utf-8")
    with MemoryEngine(tmp_path / "b.db", clock=clock) as engine:
        fill(engine)
        before = {h.record.record_id: h.record.vector for h in engine.query(limit=100)}
        import_pack(engine, pack, embed=False)
        assert engine.reembed(missing_only=True) == 1
        after = {h.record.record_id: h.record.vector for h in engine.query(limit=100)}
        assert engine.stats().without_vector == 0
        assert {rid: after[rid] for rid in before} == before
        with pytest.raises(InvalidInput, match="configured embedder"):
            engine.reembed("builtin", missing_only=True)
