"""Memory packs and importers: exact round trips, idempotency, conflicts and bad input."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import Filters, InvalidInput, MemoryEngine
from prime_memory_folding.transfer.importers import (
    read_json_store,
    read_knowledge_graph,
    read_markdown,
)
from prime_memory_folding.transfer.packs import (
    PACK_FORMAT,
    PACK_VERSION,
    export_pack,
    import_pack,
    parse_timestamp,
    write_source,
)
from tests.conftest import FakeClock


def _records(engine: MemoryEngine) -> list[Any]:
    ids = engine.match_ids()
    return sorted((engine.get(rid) for rid in ids), key=lambda r: r.record_id)


def _export(engine: MemoryEngine, path: Path, **options: Any) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        export_pack(engine, handle, **options)
    return path


def _pack_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write_lines(path: Path, lines: list[Any]) -> Path:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


_labels = st.sampled_from(["memory", "decision", "task", "alpha", "beta_gamma"])
_tags = st.lists(st.sampled_from(["important", "code", "python", "sqlite", "x_y"]), max_size=3)
_memory = st.fixed_dictionaries(
    {
        "content": st.text(min_size=1, max_size=40).filter(lambda s: s.strip() and "\x00" not in s),
        "domain": _labels,
        "tags": _tags,
        "importance": st.floats(0, 1),
        "vector": st.none() | st.lists(st.floats(-4, 4, width=32), min_size=3, max_size=3),
        "metadata": st.dictionaries(
            st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=2
        ),
    }
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memories=st.lists(_memory, max_size=8), strength=st.floats(0, 1), vectors=st.booleans())
def test_export_then_import_into_a_fresh_store_gives_identical_records(
    memories: list[dict[str, Any]], strength: float, vectors: bool
) -> None:
    now = [1_700_000_000.0]
    with tempfile.TemporaryDirectory() as folder:
        source = MemoryEngine(Path(folder) / "a.db", clock=lambda: now[0])
        for n, memory in enumerate(memories):
            if memory["vector"] is not None and not any(memory["vector"]):
                memory["vector"] = None
            now[0] += n * 17.25
            rec = source.store(**memory)
            source.update(rec.record_id, strength=strength)
        pack = _export(source, Path(folder) / "pack.jsonl", vectors=vectors)
        target = MemoryEngine(Path(folder) / "b.db", clock=lambda: 0.0)
        report = import_pack(target, pack)
        expected = _records(source)
        if not vectors:
            expected = [r.__class__(**{**_fields(r), "vector": None}) for r in expected]
        assert _records(target) == expected
        assert report.added == len(expected) and not report.readdressed
        source.close()
        target.close()


def _fields(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__}


def test_decay_bookkeeping_survives_the_round_trip(engine: MemoryEngine, tmp_path: Path) -> None:
    rec = engine.store("kept exactly")
    engine.update(rec.record_id, strength=0.25)
    pack = _export(engine, tmp_path / "p.jsonl")
    with MemoryEngine(tmp_path / "other.db") as other:
        import_pack(other, pack)
        [before] = engine.storage.fetch([rec.record_id]).values()
        [after] = other.storage.fetch([rec.record_id]).values()
        assert after == before


def test_importing_a_pack_twice_adds_nothing(engine: MemoryEngine, tmp_path: Path) -> None:
    engine.store("We use SQLite", domain="decision", tags=["sqlite"])
    engine.store("Deploy on Fridays", domain="workflow")
    pack = _export(engine, tmp_path / "p.jsonl")
    with MemoryEngine(tmp_path / "other.db") as other:
        first = import_pack(other, pack)
        second = import_pack(other, pack)
        assert (first.added, second.added, second.already_present) == (2, 0, 2)
        assert len(_records(other)) == 2


def test_dry_run_reports_and_writes_nothing(engine: MemoryEngine, tmp_path: Path) -> None:
    engine.store("one", domain="brand_new", tags=["fresh"])
    pack = _export(engine, tmp_path / "p.jsonl")
    with MemoryEngine(tmp_path / "other.db") as other:
        report = import_pack(other, pack, dry_run=True)
        assert report.dry_run and report.added == 1
        assert _records(other) == []
        assert "brand_new" not in other.stats().registries["domain"]


def test_a_label_whose_prime_is_taken_is_readdressed_and_reported(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    original = engine.store("shared fact", domain="alpha", tags=["beta"])
    pack = _export(engine, tmp_path / "p.jsonl")
    with MemoryEngine(tmp_path / "other.db") as other:
        other.store("claims the next primes first", domain="zeta", tags=["omega"])
        report = import_pack(other, pack)
        assert report.added == 1
        assert {(r.kind, r.label) for r in report.relabelled} == {
            ("domain", "alpha"),
            ("tag", "beta"),
        }
        [(old, new)] = report.readdressed
        assert old == original.record_id and new != old
        moved = other.get(new)
        assert (moved.content, moved.created_at) == (original.content, original.created_at)
        assert [h.record.record_id for h in other.query(domain="alpha", tags=["beta"])] == [new]
        assert import_pack(other, pack).added == 0


def test_a_label_new_to_the_store_keeps_its_prime_when_free(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    engine.store("first", tags=["aaa"])
    engine.store("second", tags=["bbb"])
    pack = _export(engine, tmp_path / "p.jsonl", filters=Filters(tags=["bbb"]))
    with MemoryEngine(tmp_path / "other.db") as other:
        report = import_pack(other, pack)
        assert not report.relabelled
        assert other.stats().registries["tag"]["bbb"] == engine.stats().registries["tag"]["bbb"]


def test_a_pack_from_a_newer_version_is_refused(tmp_path: Path, engine: MemoryEngine) -> None:
    pack = _write_lines(
        tmp_path / "p.jsonl", [{"format": PACK_FORMAT, "version": PACK_VERSION + 1}]
    )
    with pytest.raises(InvalidInput, match="newer"):
        import_pack(engine, pack)


@pytest.mark.parametrize(
    ("first_line", "message"),
    [
        ('{"format": "something-else", "version": 1}', "not a memory pack"),
        ("not json", "not a memory pack"),
        ('{"format": "prime-memory-pack"}', "no valid version"),
    ],
)
def test_a_file_that_is_not_a_pack_is_refused(
    tmp_path: Path, engine: MemoryEngine, first_line: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        import_pack(engine, _write_lines(tmp_path / "p.jsonl", [first_line]))


def test_missing_files_and_directories_are_one_line_errors(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        import_pack(engine, tmp_path / "nope.jsonl")
    with pytest.raises(InvalidInput, match="is a directory"):
        import_pack(engine, tmp_path)
    with pytest.raises(InvalidInput, match="is a file"):
        read_markdown(_write_lines(tmp_path / "x.md", ["# x"]))


def _pack_with_a_bad_line(tmp_path: Path) -> Path:
    header = {"format": PACK_FORMAT, "version": PACK_VERSION, "registries": {}}
    good = {"content": "good one", "domain": "memory", "created_at": 5.0}
    return _write_lines(
        tmp_path / "p.jsonl",
        [
            header,
            good,
            "{broken",
            {**good, "content": "second", "importance": 7},
            {**good, "content": "third"},
        ],
    )


def test_a_malformed_line_is_named_and_nothing_is_written(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    with pytest.raises(InvalidInput, match=r"p\.jsonl:3: not valid JSON.*1 more.*--skip-bad"):
        import_pack(engine, _pack_with_a_bad_line(tmp_path))
    assert _records(engine) == []


def test_skip_bad_goes_on_past_malformed_lines(tmp_path: Path, engine: MemoryEngine) -> None:
    report = import_pack(engine, _pack_with_a_bad_line(tmp_path), skip_bad=True)
    assert report.added == 2
    assert [(bad.line, "importance" in bad.message) for bad in report.skipped] == [
        (3, False),
        (4, True),
    ]
    assert sorted(r.content for r in _records(engine)) == ["good one", "third"]
    assert {r.created_at for r in _records(engine)} == {5.0}


def test_export_filters_by_domain_tags_and_time(
    engine: MemoryEngine, clock: Any, tmp_path: Path
) -> None:
    engine.store("old", domain="decision", tags=["a"])
    clock.advance(100)
    engine.store("new", domain="decision", tags=["a", "b"])
    engine.store("other", domain="task", tags=["a"])
    since = clock.now - 1
    cases = {
        "domain": (Filters(domain="decision"), ["old", "new"]),
        "tags": (Filters(tags=["b"]), ["new"]),
        "since": (Filters(since=since), ["new", "other"]),
        "until": (Filters(until=since), ["old"]),
        "since_age": (Filters(since="50s"), ["new", "other"]),
    }
    for name, (gates, expected) in cases.items():
        lines = _pack_lines(_export(engine, tmp_path / f"{name}.jsonl", filters=gates))
        assert lines[0]["records"] == len(expected)
        assert sorted(line["content"] for line in lines[1:]) == sorted(expected), name


def test_export_takes_its_gates_as_filters_only(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidInput, match="filters must be a Filters"):
        export_pack(engine, io.StringIO(), filters={"domain": "decision"})  # type: ignore[arg-type]


def test_vectors_are_kept_unless_left_out(engine: MemoryEngine, tmp_path: Path) -> None:
    engine.store("v", vector=[1.0, 2.0])
    without = _pack_lines(_export(engine, tmp_path / "a.jsonl", vectors=False))
    with_vectors = _pack_lines(_export(engine, tmp_path / "b.jsonl"))
    assert "vector" not in without[1] and with_vectors[1]["vector"] == [1.0, 2.0]
    assert with_vectors[0]["embedding_space"] == "custom:2"


def test_vectors_from_another_embedding_space_are_refused_or_dropped(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    engine.store("v", vector=[1.0, 2.0])
    pack = _export(engine, tmp_path / "p.jsonl", vectors=True)
    with MemoryEngine(tmp_path / "other.db") as other:
        other.store("w", vector=[1.0, 2.0, 3.0])
        with pytest.raises(InvalidInput, match="--no-vectors"):
            import_pack(other, pack)
        assert import_pack(other, pack, vectors=False).added == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12.5, 12.5),
        ("1970-01-01T00:01:00Z", 60.0),
        ("1970-01-01T00:01:00", 60.0),
        ("1970-01-01T01:01:00+01:00", 60.0),
    ],
)
def test_timestamps_may_be_numbers_or_iso_strings(value: object, expected: float) -> None:
    assert parse_timestamp(value) == expected


# -- importers ------------------------------------------------------------------------


def _legacy_store(tmp_path: Path, *, tag_prime: int = 31) -> Path:
    address = 11 << 96 | 2 << 64 | 0xABCDEF01 << 32 | 0x12345678
    data = {
        "format": "prime-memory-folding-store-v1",
        "domain_primes": {"memory": 2, "decision": 11},
        "subdomain_primes": {"general": 2},
        "tag_primes": {"architecture": 11, "legacy": tag_prime},
        "records": [
            {
                "record_id": f"{address:032x}",
                "address": address,
                "address_hex": f"0x{address:032x}",
                "domain": "decision",
                "subdomain": "general",
                "content": "Use SQLite",
                "tags": ["architecture", "legacy"],
                "tag_product": 11 * tag_prime,
                "vector": [],
                "importance": 0.7,
                "strength": 0.4,
                "created_at": "2024-01-02T03:04:05+00:00",
                "updated_at": 1704164645.0,
                "metadata": {"source": "old"},
            },
            {
                "domain": "memory",
                "content": "no address",
                "created_at": 10,
                "updated_at": "1970-01-01T00:00:20Z",
            },
        ],
    }
    path = tmp_path / "store.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_json_store_keeps_ids_primes_and_timestamps(tmp_path: Path, engine: MemoryEngine) -> None:
    report = write_source(engine, read_json_store(_legacy_store(tmp_path)))
    assert report.added == 2 and not report.readdressed
    rec = engine.get(f"{11 << 96 | 2 << 64 | 0xABCDEF01 << 32 | 0x12345678:032x}")
    assert (rec.strength, rec.importance, rec.metadata) == (0.4, 0.7, {"source": "old"})
    assert rec.created_at == parse_timestamp("2024-01-02T03:04:05Z") == rec.updated_at
    assert rec.tag_product == 11 * 31
    [other] = [r for r in _records(engine) if r.content == "no address"]
    assert (other.created_at, other.updated_at) == (10.0, 20.0)
    assert write_source(engine, read_json_store(_legacy_store(tmp_path))).added == 0


def test_json_store_tag_prime_conflicts_are_reported(tmp_path: Path, engine: MemoryEngine) -> None:
    engine.store("takes 31 first", tags=["someone_else"])
    report = write_source(engine, read_json_store(_legacy_store(tmp_path)))
    assert [(r.kind, r.label, r.source_prime) for r in report.relabelled] == [("tag", "legacy", 31)]
    assert [h.record.content for h in engine.query(tags=["legacy"])] == ["Use SQLite"]


def test_json_store_with_a_bad_record_names_it(tmp_path: Path, engine: MemoryEngine) -> None:
    path = _legacy_store(tmp_path)
    data = json.loads(path.read_text())
    data["records"][1]["importance"] = "high"
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match="record 2: importance"):
        write_source(engine, read_json_store(path))
    assert write_source(engine, read_json_store(path), skip_bad=True).added == 1


def _notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    (root / "decision").mkdir(parents=True, exist_ok=True)
    (root / "decision" / "db.md").write_text(
        "---\ntitle: Storage\ntags: [storage, sqlite]\nimportance: 0.8\n---\n"
        "# Storage\n\nIntro about #persistence.\n\n"
        "## WAL\nWe use WAL mode. #concurrency\n\n"
        "## Backups\nNightly copies.\n```sh\n# not a heading\necho #nottag\n```\n",
        encoding="utf-8",
    )
    (root / "todo.md").write_text("Ship the CLI #release", encoding="utf-8")
    return root


def test_markdown_notes_become_one_memory_per_section(tmp_path: Path, engine: MemoryEngine) -> None:
    report = write_source(engine, read_markdown(_notes(tmp_path)))
    assert report.added == 4
    by_content = {r.content.splitlines()[0]: r for r in _records(engine)}
    wal = by_content["## WAL"]
    assert (wal.domain, wal.subdomain, wal.importance) == ("decision", "document", 0.8)
    assert wal.tags == ("concurrency", "sqlite", "storage")
    assert wal.metadata == {"source": "decision/db.md", "title": "Storage", "section": "WAL"}
    assert by_content["## Backups"].tags == ("sqlite", "storage")
    assert "persistence" in by_content["# Storage"].tags
    todo = by_content["Ship the CLI #release"]
    assert (todo.domain, todo.tags) == ("memory", ("release",))
    assert write_source(engine, read_markdown(_notes(tmp_path))).added == 0


def test_unclosed_front_matter_is_a_bad_note(tmp_path: Path, engine: MemoryEngine) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "broken.md").write_text("---\ntags: [a]\nno end\n", encoding="utf-8")
    (root / "fine.md").write_text("fine", encoding="utf-8")
    source = read_markdown(root)
    assert [str(bad) for bad in source.bad] == [
        "broken.md:1: the front matter never closes with ---"
    ]
    assert write_source(engine, source, skip_bad=True).added == 1


def _graph(tmp_path: Path, *extra: str) -> Path:
    lines: list[Any] = [
        {
            "type": "entity",
            "name": "Alice",
            "entityType": "person",
            "observations": ["Prefers tabs", "Works remotely"],
        },
        {"type": "entity", "name": "Acme Corp", "entityType": "organization", "observations": []},
        {"type": "relation", "from": "Alice", "to": "Acme Corp", "relationType": "works_at"},
        *extra,
    ]
    return _write_lines(tmp_path / "memory.jsonl", lines)


def test_knowledge_graph_observations_and_relations_become_memories(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    report = write_source(engine, read_knowledge_graph(_graph(tmp_path)))
    assert report.added == 4
    assert sorted(h.record.content for h in engine.query(tags=["alice", "person"])) == [
        "Prefers tabs",
        "Works remotely",
    ]
    [relation] = [h.record for h in engine.query(tags=["relation"])]
    assert relation.content == "Alice works_at Acme Corp"
    assert relation.tags == ("acme_corp", "alice", "relation")
    assert [h.record.content for h in engine.query(tags=["organization"])] == [
        "Acme Corp is a organization"
    ]


def test_knowledge_graph_bad_lines_carry_their_numbers(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    path = _graph(tmp_path, '{"type": "entity"', '{"type": "thing"}')
    source = read_knowledge_graph(path)
    assert [bad.line for bad in source.bad] == [4, 5]
    with pytest.raises(InvalidInput, match=r"memory\.jsonl:4"):
        write_source(engine, source)
    assert write_source(engine, source, skip_bad=True).added == 4


def test_export_reports_progress(engine: MemoryEngine) -> None:
    engine.store("one")
    seen: list[tuple[int, int | None]] = []
    export_pack(engine, io.StringIO(), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 1)]


def test_export_stamps_the_time_from_the_engines_clock(
    engine: MemoryEngine, clock: FakeClock
) -> None:
    engine.store("one")
    clock.now = 1_000_000_000.0  # 2001-09-09T01:46:40Z
    out = io.StringIO()
    export_pack(engine, out)
    header = json.loads(out.getvalue().splitlines()[0])
    assert header["exported_at"] == "2001-09-09T01:46:40+00:00"
