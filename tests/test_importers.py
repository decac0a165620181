"""The readers behind every import: what they count, and the progress they report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.transfer.importers import (
    read_json_store,
    read_knowledge_graph,
    read_markdown,
)
from prime_memory_folding.transfer.packs import Source, read_pack, write_source

Calls = list[tuple[int, "int | None"]]


def _graph(tmp_path: Path) -> Path:
    path = tmp_path / "memory.jsonl"
    path.write_text(
        '{"type": "entity", "name": "Bob", "entityType": "person", '
        '"observations": ["Likes tea", "Works nights"]}\n'
        "\n"
        '{"type": "entity", "name": "Acme", "entityType": "company"}\n'
        '{"type": "relation", "from": "Bob", "to": "Acme", "relationType": "works_at"}\n'
        "{oops\n"
        '{"type": "mystery"}\n',
        encoding="utf-8",
    )
    return path


def _pack(tmp_path: Path) -> Path:
    path = tmp_path / "p.jsonl"
    lines = [{"format": "prime-memory-pack", "version": 1}, {"content": "é one"}]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n{bad\n", encoding="utf-8")
    return path


def _notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "work").mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\n## One\nfirst\n\n## Two\nsecond\n")
    (folder / "work" / "b.md").write_text("Just a note #idea")
    (folder / "c.md").write_text("---\ntags: [x]\nno end\n")
    return folder


def _json_store(tmp_path: Path) -> Path:
    path = tmp_path / "store.json"
    records = [{"content": "one"}, {"content": "two"}, {"content": ""}]
    path.write_text(json.dumps({"format": "prime-memory-folding-store-v1", "records": records}))
    return path


@pytest.mark.parametrize(
    ("read", "make", "lines", "unit", "memories", "bad"),
    [
        (read_knowledge_graph, _graph, 5, "line", 4, 2),
        (read_pack, _pack, 2, "line", 1, 1),
        (read_markdown, _notes, 3, "note", 3, 1),
        (read_json_store, _json_store, 3, "record", 2, 1),
    ],
)
def test_readers_count_what_they_read_apart_from_the_memories_it_held(
    tmp_path: Path, read: object, make: object, lines: int, unit: str, memories: int, bad: int
) -> None:
    source: Source = read(make(tmp_path))  # type: ignore[operator]
    assert (source.lines, source.unit) == (lines, unit)
    assert (len(source.records), len(source.bad)) == (memories, bad)


@pytest.mark.parametrize("read", [read_knowledge_graph, read_pack])
def test_line_readers_report_progress_in_bytes_up_to_the_file_size(
    tmp_path: Path, read: object
) -> None:
    path = _graph(tmp_path) if read is read_knowledge_graph else _pack(tmp_path)
    calls: Calls = []
    read(path, progress=lambda done, total: calls.append((done, total)))  # type: ignore[operator]
    size = path.stat().st_size
    assert calls[-1] == (size, size)
    assert all(total == size and 0 <= done <= size for done, total in calls)


def test_a_long_knowledge_graph_reports_progress_while_reading(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    line = '{"type": "entity", "name": "Bob", "entityType": "person"}\n'
    path.write_text(line * 2_500, encoding="utf-8")
    calls: Calls = []
    read_knowledge_graph(path, progress=lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert calls == [(len(line) * 1_000, size), (len(line) * 2_000, size), (size, size)]


def test_markdown_reports_progress_over_notes(tmp_path: Path) -> None:
    calls: Calls = []
    read_markdown(_notes(tmp_path), progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 3), (3, 3)]


def test_json_store_reports_progress_over_records(tmp_path: Path) -> None:
    calls: Calls = []
    read_json_store(_json_store(tmp_path), progress=lambda done, total: calls.append((done, total)))
    assert calls == [(3, 3)]


def test_the_import_report_keeps_lines_and_memories_apart(
    tmp_path: Path, engine: MemoryEngine
) -> None:
    report = write_source(engine, read_knowledge_graph(_graph(tmp_path)), skip_bad=True)
    assert (report.lines, report.unit, report.read, report.added) == (5, "line", 4, 4)
    assert len(report.skipped) == 2
