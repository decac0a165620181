"""Backups and their rough edges through the installed ``prime-memory`` command.

An exported store imported into a new one ranks as it did; a pack without
vectors gets them on import; stats and doctor count what has none; a big
folder import asks first; a label that normalisation changed is named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from prime_memory_folding import MemoryEngine
from prime_memory_folding.cli import cli

from . import pg_helpers
from .test_backups import NOTES, fill, top10

PROGRAM = Path(sys.executable).with_name("prime-memory")

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def prime_memory() -> Run:
    """``prime_memory(*args, embedder=None)``: the command, with no terminal on stdin.

    ``embedder`` None is the bundled one, as a user has it.
    """

    def run(*args: str, embedder: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env.pop("PRIME_MEMORY_EMBEDDER", None)
        if embedder is not None:
            env["PRIME_MEMORY_EMBEDDER"] = embedder
        return subprocess.run(
            [str(PROGRAM), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return run


def new_store(path: str) -> str:
    MemoryEngine(path, embedder="none").close()
    return path


def pack_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def same_ranking(source: str, target: str, pack: Path, prime_memory: Run, clock: Any) -> None:
    with MemoryEngine(source, clock=clock, embedder="builtin") as engine:
        fill(engine)
    done = prime_memory("--store", source, "export", str(pack))
    assert done.returncode == 0, done.stderr
    assert f"exported {len(NOTES)} records with vectors" in done.stderr
    assert all("vector" in line for line in pack_lines(pack)[1:])
    done = prime_memory("--store", new_store(target), "import", str(pack))
    assert done.returncode == 0, done.stderr
    assert f"added {len(NOTES)}" in done.stdout
    with (
        MemoryEngine(source, clock=clock, embedder="builtin") as before,
        MemoryEngine(target, clock=clock, embedder="builtin") as after,
    ):
        assert after.stats().without_vector == 0
        ranked = top10(before)
        assert top10(after) == ranked
        assert all(len(ids) == 10 for ids in ranked)


def test_export_then_import_ranks_every_query_as_before(
    tmp_path: Path, prime_memory: Run, clock: Any
) -> None:
    same_ranking(
        str(tmp_path / "a.db"), str(tmp_path / "b.db"), tmp_path / "p.jsonl", prime_memory, clock
    )


def test_export_then_import_ranks_as_before_on_postgresql(
    pg_url: str, pg_database: str, tmp_path: Path, prime_memory: Run, clock: Any
) -> None:
    target = pg_helpers.new_schema(pg_database)
    same_ranking(pg_url, target, tmp_path / "p.jsonl", prime_memory, clock)


def test_no_vectors_export_has_none_and_the_import_embeds_them(
    tmp_path: Path, prime_memory: Run, clock: Any
) -> None:
    source = str(tmp_path / "a.db")
    with MemoryEngine(source, clock=clock, embedder="builtin") as engine:
        fill(engine)
    pack = tmp_path / "small.jsonl"
    done = prime_memory("--store", source, "export", str(pack), "--no-vectors")
    assert done.returncode == 0, done.stderr
    assert "without vectors" in done.stderr
    lines = pack_lines(pack)
    assert lines[0]["vectors"] is False
    assert not any("vector" in line for line in lines[1:])
    old = prime_memory("--store", source, "export", str(tmp_path / "old.jsonl"), "--vectors")
    assert old.returncode == 0 and all(
        "vector" in x for x in pack_lines(tmp_path / "old.jsonl")[1:]
    )

    target = new_store(str(tmp_path / "b.db"))
    done = prime_memory("--store", target, "import", str(pack))
    assert done.returncode == 0, done.stderr
    assert f"embedded {len(NOTES)} memories without a vector" in done.stderr
    with MemoryEngine(target, clock=clock, embedder="builtin") as engine:
        assert engine.stats().without_vector == 0


def test_no_vectors_import_drops_them_and_embeds_again(
    tmp_path: Path, prime_memory: Run, clock: Any
) -> None:
    source = str(tmp_path / "a.db")
    with MemoryEngine(source, clock=clock) as engine:
        engine.store("a note with a vector of another space", vector=[1.0, 0.0, 0.0])
    pack = tmp_path / "p.jsonl"
    assert prime_memory("--store", source, "export", str(pack)).returncode == 0
    target = new_store(str(tmp_path / "b.db"))
    done = prime_memory("--store", target, "import", str(pack), "--no-vectors")
    assert done.returncode == 0, done.stderr
    with MemoryEngine(target, clock=clock) as engine:
        summary = engine.stats()
        assert summary.without_vector == 0
        assert summary.embedding_space is not None
        assert not summary.embedding_space.startswith("custom:")
    kept = new_store(str(tmp_path / "c.db"))
    done = prime_memory("--store", kept, "import", str(pack), "--no-vectors", embedder="none")
    assert done.returncode == 0, done.stderr
    assert "embedded" not in done.stderr
    with MemoryEngine(kept, clock=clock) as engine:
        assert engine.stats().without_vector == 1


def test_stats_and_doctor_count_memories_without_a_vector(
    tmp_path: Path, prime_memory: Run, clock: Any
) -> None:
    store = str(tmp_path / "a.db")
    with MemoryEngine(store, clock=clock, embedder="none") as engine:
        fill(engine)
    stats = prime_memory("--store", store, "stats")
    assert stats.returncode == 0, stats.stderr
    assert f"without a vector: {len(NOTES)} records" in stats.stdout
    assert "prime-memory reembed" in stats.stdout
    as_json = prime_memory("--store", store, "stats", "--json")
    assert json.loads(as_json.stdout)["without_vector"] == len(NOTES)
    quiet = prime_memory("--store", store, "stats", embedder="none")
    assert "without a vector" not in quiet.stdout

    doctor = prime_memory("--store", store, "doctor", "--processes", "0")
    assert doctor.returncode == 1
    said = " ".join(doctor.stdout.split())  # rich wraps long lines in a pipe
    assert f"FAIL vectors {len(NOTES)} of {len(NOTES)} records have no vector" in said
    assert "prime-memory reembed" in said

    assert prime_memory("--store", store, "reembed").returncode == 0
    doctor = prime_memory("--store", store, "doctor", "--processes", "0")
    assert doctor.returncode == 0, doctor.stdout
    assert "without a vector" not in prime_memory("--store", store, "stats").stdout


def notes_folder(root: Path, count: int) -> Path:
    folder = root / "notes"
    folder.mkdir()
    for f in range(4):
        sections = [
            f"## Note {f}-{n}\n\nWhat we learnt, number {f}-{n}.\n" for n in range(count // 4)
        ]
        (folder / f"file{f}.md").write_text("\n".join(sections), encoding="utf-8")
    return folder


def test_a_big_folder_import_needs_yes_without_a_terminal(
    tmp_path: Path, prime_memory: Run
) -> None:
    store = new_store(str(tmp_path / "a.db"))
    folder = notes_folder(tmp_path, 320)
    dry = prime_memory("--store", store, "import", str(folder), "--dry-run", embedder="none")
    assert dry.returncode == 0, dry.stderr
    assert "would add 320" in dry.stdout
    refused = prime_memory("--store", store, "import", str(folder), embedder="none")
    assert refused.returncode == 1
    (line,) = refused.stderr.strip().splitlines()
    assert "add 320 memories" in line and "--yes" in line and "nothing was imported" in line
    with MemoryEngine(store, embedder="none") as engine:
        assert engine.stats().records == 0
    done = prime_memory("--store", store, "import", str(folder), "--yes", embedder="none")
    assert done.returncode == 0, done.stderr
    assert "added 320" in done.stdout
    again = prime_memory("--store", store, "import", str(folder), embedder="none")
    assert again.returncode == 0 and "added 0 (320 already present)" in again.stdout


def test_a_big_folder_import_asks_on_a_terminal_showing_the_count(
    tmp_path: Path, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new_store(str(store_path))
    folder = notes_folder(tmp_path, 320)
    monkeypatch.setattr("prime_memory_folding.cli._common.stdin_is_terminal", lambda: True)
    argv = ["--store", str(store_path), "import", str(folder)]
    no = CliRunner().invoke(cli, argv, input="n\n")
    assert no.exit_code == 1
    assert "Add 320 memories from" in no.stderr and "nothing was imported" in no.stderr
    yes = CliRunner().invoke(cli, argv, input="y\n")
    assert yes.exit_code == 0, yes.output
    assert "added 320" in yes.stdout
    (tmp_path / "small").mkdir()
    small = notes_folder(tmp_path / "small", 40)
    quiet = CliRunner().invoke(cli, ["--store", str(store_path), "import", str(small)])
    assert quiet.exit_code == 0 and "Add " not in quiet.stderr


def test_store_names_a_label_that_normalisation_changed(tmp_path: Path, prime_memory: Run) -> None:
    store = new_store(str(tmp_path / "a.db"))
    done = prime_memory(
        "--store", store, "store", "a note", "-d", "Bad Domain!", "-t", "Big Tag", "-t", "ok",
        embedder="none",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "domain 'Bad Domain!' is stored as 'bad_domain!'",
        "tag 'Big Tag' is stored as 'big_tag'",
    ]
    plain = prime_memory("--store", store, "store", "another", "-d", "decision", embedder="none")
    assert plain.returncode == 0 and plain.stderr == ""


def test_doctor_reads_a_postgresql_store_from_the_command_line(
    pg_url: str, prime_memory: Run, clock: Any
) -> None:
    with MemoryEngine(pg_url, clock=clock) as engine:
        engine.store("a note", domain="decision")
    done = prime_memory("--store", pg_url, "doctor", "--processes", "0", embedder="none")
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "does not apply to PostgreSQL" in said and "records 1" in said
