"""Importing other memory tools' data: mem0's JSON and claude-mem's SQLite database.

The fixtures are written from each tool's own format: mem0's ``get_all`` output
(``MemoryItem`` plus the promoted ids, mem0ai/mem0 8d5b786) and claude-mem's
``SessionStore`` schema (thedotmack/claude-mem e2d1df5, v13.15.3).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding.transfer.tool_exports import read_claude_mem, read_mem0, sniff_format
from tests.cli_helpers import one_line_error

MEM0_MEMORIES: list[dict[str, Any]] = [
    {
        "id": "1a75e827-7eca-45ea-8c5c-cfd43299f061",
        "memory": "Name is Alex",
        "user_id": "alex",
        "hash": "d0fccc8fa47f7a149ee95750c37bb0ca",
        "metadata": {"food": "vegan"},
        "categories": ["personal_details"],
        "created_at": "2024-11-27T16:53:43.276872-08:00",
        "updated_at": "2024-11-27T16:53:43.276885-08:00",
    },
    {
        "id": "f4cbdb08-7062-4f3e-8eb2-9f5c80dfe64c",
        "memory": "Prefers pytest over unittest",
        "agent_id": "coder",
        "run_id": "run-7",
        "hash": hashlib.md5(b"Prefers pytest over unittest").hexdigest(),
        "created_at": "2024-07-01T12:00:00Z",
        "updated_at": None,
    },
]

# claude-mem's tables as SessionStore creates them after its migrations.
CLAUDE_MEM_SCHEMA = """
CREATE TABLE schema_versions (id INTEGER PRIMARY KEY, version INTEGER UNIQUE NOT NULL,
  applied_at TEXT NOT NULL);
CREATE TABLE sdk_sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT, content_session_id TEXT NOT NULL,
  memory_session_id TEXT UNIQUE, project TEXT NOT NULL,
  platform_source TEXT NOT NULL DEFAULT 'claude', user_prompt TEXT,
  started_at TEXT NOT NULL, started_at_epoch INTEGER NOT NULL, completed_at TEXT,
  completed_at_epoch INTEGER,
  status TEXT CHECK(status IN ('active', 'completed', 'failed')) NOT NULL DEFAULT 'active');
CREATE TABLE observations (
  id INTEGER PRIMARY KEY AUTOINCREMENT, memory_session_id TEXT NOT NULL, project TEXT NOT NULL,
  text TEXT, type TEXT NOT NULL, title TEXT, subtitle TEXT, facts TEXT, narrative TEXT,
  concepts TEXT, files_read TEXT, files_modified TEXT, prompt_number INTEGER,
  discovery_tokens INTEGER DEFAULT 0, created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL, metadata TEXT, content_hash TEXT,
  FOREIGN KEY(memory_session_id) REFERENCES sdk_sessions(memory_session_id));
CREATE TABLE session_summaries (
  id INTEGER PRIMARY KEY AUTOINCREMENT, memory_session_id TEXT NOT NULL, project TEXT NOT NULL,
  request TEXT, investigated TEXT, learned TEXT, completed TEXT, next_steps TEXT,
  files_read TEXT, files_edited TEXT, notes TEXT, prompt_number INTEGER,
  discovery_tokens INTEGER DEFAULT 0, created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL,
  FOREIGN KEY(memory_session_id) REFERENCES sdk_sessions(memory_session_id));
CREATE TABLE user_prompts (
  id INTEGER PRIMARY KEY AUTOINCREMENT, content_session_id TEXT NOT NULL,
  prompt_number INTEGER NOT NULL, prompt_text TEXT NOT NULL, created_at TEXT NOT NULL,
  created_at_epoch INTEGER NOT NULL);
"""

#: 2025-01-02T03:04:05Z in claude-mem's milliseconds.
EPOCH_MS = 1_735_787_045_000


def _mem0(tmp_path: Path, data: object, name: str = "mem0.json", indent: int | None = 2) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=indent), encoding="utf-8")
    return path


def _claude_mem(tmp_path: Path) -> Path:
    path = tmp_path / "claude-mem.db"
    with sqlite3.connect(path) as db:
        db.executescript(CLAUDE_MEM_SCHEMA)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(
            "INSERT INTO sdk_sessions (content_session_id, memory_session_id, project, "
            "started_at, started_at_epoch) VALUES ('claude-1', 'mem-1', 'api', 'x', 1)"
        )
        db.execute(
            "INSERT INTO observations (memory_session_id, project, type, title, subtitle, "
            "facts, narrative, concepts, files_read, files_modified, prompt_number, "
            "created_at, created_at_epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                "mem-1", "api", "decision", "Use WAL mode", "for concurrent readers",
                json.dumps(["Readers never block the writer", "Checkpoints run at 1000 pages"]),
                "SQLite runs in WAL mode so agents can read while one writes.",
                json.dumps(["trade-off", "how-it-works"]), json.dumps(["src/db.py"]),
                json.dumps(["src/store.py"]), 2, "2025-01-02T03:04:05.000Z", EPOCH_MS,
            ),
        )  # fmt: skip
        db.execute(
            "INSERT INTO observations (memory_session_id, project, type, text, "
            "created_at, created_at_epoch) VALUES ('mem-1', 'api', 'bugfix', "
            "'Fixed the flaky login test', '2025-01-02T03:04:05.000Z', ?)",
            (EPOCH_MS,),
        )
        db.execute(
            "INSERT INTO session_summaries (memory_session_id, project, request, learned, "
            "completed, next_steps, files_edited, created_at, created_at_epoch) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                "mem-1", "api", "Make the store safe for many readers", "WAL needs shared memory",
                "Switched to WAL", "Measure checkpoint pauses", json.dumps(["src/store.py"]),
                "2025-01-02T03:04:05.000Z", EPOCH_MS,
            ),
        )  # fmt: skip
        db.execute(
            "INSERT INTO user_prompts (content_session_id, prompt_number, prompt_text, "
            "created_at, created_at_epoch) VALUES ('claude-1', 1, 'a raw prompt', 'x', 1)"
        )
    return path


def _exported(run: Any) -> list[dict[str, Any]]:
    """The store's records, as a pack exports them."""
    result = run("export")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()[1:]]


def _records(run: Any) -> int:
    """How many records the test's store holds; none when a failed import never made it."""
    result = run("stats", "--json")
    if result.exit_code != 0 and "no store at" in result.stderr:
        return 0
    count: int = json.loads(result.stdout)["records"]
    return count


# -- mem0 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["list", "results", "one line"])
def test_mem0_import_dry_run_counts_then_writes(run: Any, tmp_path: Path, shape: str) -> None:
    if shape == "results":
        data: object = {"count": 2, "next": None, "previous": None, "results": MEM0_MEMORIES}
    else:
        data = MEM0_MEMORIES
    path = _mem0(tmp_path, data, indent=None if shape == "one line" else 2)
    dry = run("import", str(path), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "read 2 records from" in dry.stdout and "would add 2" in dry.stdout
    assert "dry run: nothing was written" in dry.stdout
    assert _records(run) == 0
    done = run("import", str(path), "--format", "mem0", "--json")
    assert json.loads(done.stdout)["added"] == 2


def test_a_mem0_memory_keeps_its_text_categories_ids_and_times(run: Any, tmp_path: Path) -> None:
    assert run("import", str(_mem0(tmp_path, MEM0_MEMORIES))).exit_code == 0
    records = {r["content"]: r for r in _exported(run)}
    alex = records["Name is Alex"]
    assert (alex["domain"], alex["subdomain"], alex["tags"]) == (
        "memory",
        "semantic",
        ["personal_details"],
    )
    assert alex["metadata"] == {
        "food": "vegan",
        "mem0": {
            "id": "1a75e827-7eca-45ea-8c5c-cfd43299f061",
            "hash": "d0fccc8fa47f7a149ee95750c37bb0ca",
            "user_id": "alex",
        },
    }
    assert alex["scope"] == "global"
    assert alex["created_at"] == pytest.approx(1732755223.276872)
    assert alex["updated_at"] == pytest.approx(1732755223.276885)
    pytest_memory = records["Prefers pytest over unittest"]
    assert pytest_memory["metadata"]["mem0"]["agent_id"] == "coder"
    assert pytest_memory["metadata"]["mem0"]["run_id"] == "run-7"
    assert pytest_memory["updated_at"] == pytest_memory["created_at"] == 1719835200.0


def test_mem0_import_goes_to_the_scope_asked_for_and_twice_adds_nothing(
    run: Any, tmp_path: Path
) -> None:
    path = _mem0(tmp_path, {"results": MEM0_MEMORIES})
    first = run("import", str(path), "--scope", "user:alex", "-d", "preference")
    assert first.exit_code == 0, first.output
    assert "per scope: user:alex 2" in first.stdout
    assert {(r["scope"], r["domain"]) for r in _exported(run)} == {("user:alex", "preference")}
    again = run("import", str(path), "--scope", "user:alex", "-d", "preference", "--json")
    assert json.loads(again.stdout)["already_present"] == 2
    assert json.loads(again.stdout)["added"] == 0


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"memories": []}, "not mem0's memories"),
        ({"results": {"id": "x"}}, "not mem0's memories"),
        ("just text", "not mem0's memories"),
    ],
)
def test_a_mem0_file_of_another_shape_is_a_clear_error(
    run: Any, tmp_path: Path, data: object, fragment: str
) -> None:
    path = _mem0(tmp_path, data)
    one_line_error(run("import", str(path), "--format", "mem0"), fragment, "'results'")
    assert _records(run) == 0


def test_a_bad_mem0_memory_stops_the_import_unless_skipped(run: Any, tmp_path: Path) -> None:
    bad = [*MEM0_MEMORIES, {"id": "x", "memory": ""}, {"id": "y", "memory": "ok", "categories": 3}]
    path = _mem0(tmp_path, bad)
    one_line_error(run("import", str(path)), "record 3", "'memory' must be", "--skip-bad")
    assert _records(run) == 0
    skipped = run("import", str(path), "--skip-bad")
    assert skipped.exit_code == 0 and "2 bad records skipped" in skipped.stdout
    assert _records(run) == 2


def test_mem0_json_that_does_not_parse_is_a_clear_error(run: Any, tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[{"memory": "x",', encoding="utf-8")
    one_line_error(run("import", str(path), "--format", "mem0"), "not valid JSON")
    assert _records(run) == 0


# -- claude-mem ---------------------------------------------------------------------------


def test_claude_mem_import_dry_run_counts_then_writes(run: Any, tmp_path: Path) -> None:
    path = _claude_mem(tmp_path)
    dry = run("import", str(path), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "read 3 rows from" in dry.stdout and "3 memories; would add 3" in dry.stdout
    assert _records(run) == 0
    done = run("import", str(path), "--format", "claude-mem", "--json")
    report = json.loads(done.stdout)
    assert report["added"] == 3
    assert report["added_per_domain"] == {"bugfix": 1, "decision": 1, "session-summary": 1}


def test_a_claude_mem_observation_and_summary_keep_what_they_hold(run: Any, tmp_path: Path) -> None:
    assert run("import", str(_claude_mem(tmp_path))).exit_code == 0
    records = {r["domain"]: r for r in _exported(run)}
    decision = records["decision"]
    assert decision["content"] == (
        "Use WAL mode\nfor concurrent readers\n\n"
        "SQLite runs in WAL mode so agents can read while one writes.\n\n"
        "- Readers never block the writer\n- Checkpoints run at 1000 pages"
    )
    assert decision["subdomain"] == "observation"
    assert decision["tags"] == sorted(["trade-off", "how-it-works", "src/store.py", "src/db.py"])
    assert decision["session"] == "mem-1"
    assert decision["created_at"] == EPOCH_MS / 1000
    assert decision["metadata"] == {
        "source": "claude-mem",
        "claude_mem": {"table": "observation", "id": 1, "session": "mem-1"},
        "project": "api",
        "title": "Use WAL mode",
        "files_read": ["src/db.py"],
        "files_modified": ["src/store.py"],
        "prompt_number": 2,
    }
    assert records["bugfix"]["content"] == "Fixed the flaky login test"
    summary = records["session-summary"]
    assert summary["content"] == (
        "Request: Make the store safe for many readers\n\nLearned: WAL needs shared memory\n\n"
        "Completed: Switched to WAL\n\nNext steps: Measure checkpoint pauses"
    )
    assert summary["session"] == "mem-1" and summary["tags"] == []
    assert summary["metadata"]["project"] == "api"
    assert summary["metadata"]["files_edited"] == ["src/store.py"]


def test_claude_mem_import_goes_to_the_scope_asked_for_and_twice_adds_nothing(
    run: Any, tmp_path: Path
) -> None:
    path = _claude_mem(tmp_path)
    scope = "project:github.com/acme/api"
    first = run("import", str(path), "--scope", scope)
    assert first.exit_code == 0, first.output
    assert {r["scope"] for r in _exported(run)} == {scope}
    again = run("import", str(path), "--scope", scope, "--json")
    assert (json.loads(again.stdout)["added"], json.loads(again.stdout)["already_present"]) == (
        0,
        3,
    )


def test_claude_mem_database_is_never_written(run: Any, tmp_path: Path) -> None:
    path = _claude_mem(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = path.read_bytes()
    assert run("import", str(path)).exit_code == 0
    assert path.read_bytes() == before


def test_an_older_claude_mem_schema_reads_by_its_old_session_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE observations (id INTEGER PRIMARY KEY, sdk_session_id TEXT, "
            "project TEXT, text TEXT, type TEXT, created_at TEXT, created_at_epoch INTEGER);"
            "CREATE TABLE session_summaries (id INTEGER PRIMARY KEY, sdk_session_id TEXT, "
            "project TEXT, request TEXT, created_at TEXT, created_at_epoch INTEGER);"
            "INSERT INTO observations VALUES (1, 's-1', 'p', 'An old note', 'discovery', 'x', 1);"
        )
    source = read_claude_mem(path)
    assert [(r.content, r.domain, r.session) for r in source.records] == [
        ("An old note", "discovery", "s-1")
    ]


@pytest.mark.parametrize(
    ("make", "fragments"),
    [
        (
            lambda db: db.execute("CREATE TABLE notes (id INTEGER)"),
            ["not a claude-mem database", "no observations or session_summaries table"],
        ),
        (
            lambda db: db.executescript(
                "CREATE TABLE observations (id INTEGER, memory_session_id TEXT, type TEXT);"
                "CREATE TABLE session_summaries (id INTEGER, memory_session_id TEXT, project TEXT);"
            ),
            ["not a claude-mem database", "observations table has no project column"],
        ),
    ],
)
def test_an_sqlite_file_that_is_not_claude_mem_is_a_clear_error(
    run: Any, tmp_path: Path, make: Any, fragments: list[str]
) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        make(db)
    one_line_error(run("import", str(path)), *fragments)
    assert _records(run) == 0


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"SQLite format 3\x00" + b"\xff" * 4000, "cannot be read as an SQLite database"),
        (b"not a database at all", "is not an SQLite database"),
    ],
)
def test_a_corrupt_claude_mem_file_is_a_clear_error(
    run: Any, tmp_path: Path, content: bytes, fragment: str
) -> None:
    path = tmp_path / "claude-mem.db"
    path.write_bytes(content)
    one_line_error(run("import", str(path), "--format", "claude-mem"), fragment)
    assert _records(run) == 0


def test_our_own_store_is_not_taken_for_claude_mem(run: Any, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    assert run("--store", str(other), "store", "x", store=False).exit_code == 0
    one_line_error(run("import", str(other)), "not a claude-mem database")


# -- telling them apart ---------------------------------------------------------------


def test_formats_are_told_apart_by_their_contents(tmp_path: Path) -> None:
    assert sniff_format(_claude_mem(tmp_path)) == "claude-mem"
    assert sniff_format(_mem0(tmp_path, MEM0_MEMORIES, "a.json")) == "mem0"
    assert sniff_format(_mem0(tmp_path, {"results": MEM0_MEMORIES}, "b.json", None)) == "mem0"
    store = {"format": "prime-memory-folding-store-v1", "records": [{"content": "x"}]}
    assert sniff_format(_mem0(tmp_path, store, "c.json")) is None
    assert sniff_format(_mem0(tmp_path, [{"content": "x"}], "d.json")) is None
    pack = tmp_path / "p.jsonl"
    header = {"format": "prime-memory-pack", "version": 1}
    line = {"content": "x", "metadata": {"results": [], "memory": "y"}}
    pack.write_text(json.dumps(header) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    assert sniff_format(pack) is None


def test_readers_report_progress_to_the_end(tmp_path: Path) -> None:
    calls: list[tuple[int, int | None]] = []
    read_mem0(
        _mem0(tmp_path, MEM0_MEMORIES), progress=lambda done, total: calls.append((done, total))
    )
    assert calls[-1] == (2, 2)
    calls.clear()
    read_claude_mem(_claude_mem(tmp_path), progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (3, 3)
