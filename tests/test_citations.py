"""Citations: memories that point at code, checked against a git working tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from prime_memory_folding import CitationState, MemoryEngine
from prime_memory_folding.core import citations
from prime_memory_folding.errors import InvalidInput
from tests.git_repos import CLIENT, git, make_repo

DB = '''import sqlite3


def helper():
    return 1


def connect(path):
    """Open the store."""
    conn = sqlite3.connect(path)
    return conn


class Store:
    pass
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"src/client.py": CLIENT, "src/db.py": DB, "README.md": "# Project\n\nHow to run it.\n"}
    return make_repo(tmp_path / "project", files)


def only_state(engine: MemoryEngine) -> CitationState:
    (hit,) = engine.query()
    (state,) = hit.citations
    return state


def test_cited_lines_are_kept_as_a_fingerprint_with_the_commit(
    engine: MemoryEngine, repo: Path
) -> None:
    record = engine.store(
        "the client retries", cites=[{"path": "src/client.py", "lines": "10-12"}], repo=repo
    )
    (cite,) = record.metadata["cites"]
    assert cite["path"] == "src/client.py"
    assert cite["lines"] == "10-12"
    assert cite["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert "line 10" not in str(cite)
    assert engine.get(record.record_id).metadata["cites"] == [cite]


def test_unchanged_lines_are_verified(engine: MemoryEngine, repo: Path) -> None:
    engine.store("retries", cites=[{"path": "src/client.py", "lines": "10-12"}], repo=repo)
    state = only_state(engine)
    assert (state.path, state.state, state.lines) == ("src/client.py", "verified", "10-12")
    (hit,) = engine.query()
    assert hit.score_parts["citations"] == 1.0


def test_lines_pushed_down_are_moved_with_their_new_place(engine: MemoryEngine, repo: Path) -> None:
    engine.store("retries", cites=[{"path": "src/client.py", "lines": "10-12"}], repo=repo)
    (repo / "src" / "client.py").write_text("new 1\nnew 2\nnew 3\n" + CLIENT)
    state = only_state(engine)
    assert (state.state, state.lines) == ("moved", "13-15")


def test_trailing_whitespace_does_not_make_lines_stale(engine: MemoryEngine, repo: Path) -> None:
    engine.store("retries", cites=[{"path": "src/client.py", "lines": "10-12"}], repo=repo)
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 11\n", "line 11   \n"))
    assert only_state(engine).state == "verified"


def test_changed_lines_are_stale(engine: MemoryEngine, repo: Path) -> None:
    engine.store("retries", cites=[{"path": "src/client.py", "lines": "10-12"}], repo=repo)
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 11\n", "line eleven\n"))
    state = only_state(engine)
    assert (state.state, state.lines) == ("stale", None)
    (hit,) = engine.query()
    assert hit.score_parts["citations"] == 0.5


def test_a_deleted_file_is_stale(engine: MemoryEngine, repo: Path) -> None:
    engine.store("retries", cites=[{"path": "src/client.py", "lines": "10-12"}], repo=repo)
    (repo / "src" / "client.py").unlink()
    state = only_state(engine)
    assert state.state == "stale"
    assert "gone" in state.detail


@pytest.mark.parametrize("commit", [True, False], ids=["committed", "uncommitted"])
def test_a_renamed_file_is_followed(engine: MemoryEngine, repo: Path, commit: bool) -> None:
    engine.store(
        "retries",
        cites=[{"path": "src/client.py", "lines": "10-12"}, {"path": "src/db.py"}],
        repo=repo,
    )
    git(repo, "mv", "src/client.py", "src/http_client.py")
    git(repo, "mv", "src/db.py", "src/store.py")
    if commit:
        git(repo, "commit", "-q", "-m", "rename")
    (hit,) = engine.query()
    lines, whole = hit.citations
    assert (lines.path, lines.state, lines.lines) == ("src/http_client.py", "moved", "10-12")
    assert (whole.path, whole.state) == ("src/store.py", "moved")
    assert hit.score_parts["citations"] == 1.0


def test_a_symbol_survives_moving_within_its_file(engine: MemoryEngine, repo: Path) -> None:
    engine.store("connect opens", cites=[{"path": "src/db.py", "symbol": "connect"}], repo=repo)
    assert only_state(engine).lines == "8-11"
    moved = DB.replace("def helper():\n    return 1\n", "") + "\n\ndef helper():\n    return 1\n"
    (repo / "src" / "db.py").write_text(moved)
    state = only_state(engine)
    assert (state.state, state.lines) == ("verified", "6-9")


def test_a_changed_symbol_is_stale(engine: MemoryEngine, repo: Path) -> None:
    engine.store("connect opens", cites=[{"path": "src/db.py", "symbol": "connect"}], repo=repo)
    (repo / "src" / "db.py").write_text(DB.replace("return conn", "return None"))
    assert only_state(engine).state == "stale"


def test_a_symbol_in_a_file_that_is_not_python_is_its_first_mention(
    engine: MemoryEngine, repo: Path
) -> None:
    engine.store("how to run", cites=[{"path": "README.md", "symbol": "run"}], repo=repo)
    assert only_state(engine).lines == "3-3"


def test_a_whole_file_goes_stale_on_any_edit(engine: MemoryEngine, repo: Path) -> None:
    record = engine.store("readme", cites=[{"path": "README.md"}], repo=repo)
    blob = git(repo, "hash-object", "README.md").strip()
    assert record.metadata["cites"][0]["fingerprint"] == f"blob:{blob}"
    assert only_state(engine).state == "verified"
    (repo / "README.md").write_text("# Project\n\nHow to run it!\n")
    assert only_state(engine).state == "stale"


def test_a_stale_memory_ranks_below_an_equally_good_verified_one(
    engine: MemoryEngine, repo: Path
) -> None:
    kept = engine.store("kept", cites=[{"path": "src/db.py"}], repo=repo)
    changed = engine.store("changed", cites=[{"path": "README.md"}], repo=repo)
    plain = engine.store("cites nothing")
    before = engine.query()
    assert before[0].score == before[1].score == before[2].score
    (repo / "README.md").write_text("changed\n")
    hits = engine.query()
    assert [hit.record.record_id for hit in hits][-1] == changed.record_id
    assert {hit.record.record_id for hit in hits[:2]} == {kept.record_id, plain.record_id}
    assert hits[-1].score == pytest.approx(before[0].score * 0.5)
    assert "citations" not in next(h for h in hits if h.record == plain).score_parts


def test_a_second_query_does_not_read_an_unchanged_file_again(
    engine: MemoryEngine, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.store("retries", cites=[{"path": "src/client.py", "lines": "10-12"}], repo=repo)
    reads: list[Path] = []
    real = citations.read_file

    def counted(path: Path) -> bytes:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(citations, "read_file", counted)
    engine.query()
    engine.query()
    assert reads == [repo / "src" / "client.py"]
    (repo / "src" / "client.py").write_text("x\n" + CLIENT)
    assert only_state(engine).state == "moved"
    assert len(reads) == 2


@pytest.mark.parametrize(
    ("cite", "words"),
    [
        ({"path": "../outside.py"}, "'..'"),
        ({"path": "src/../../outside.py"}, "'..'"),
        ({"path": "/etc/passwd"}, "absolute"),
        ({"path": "src/missing.py"}, "not a file"),
        ({"path": "src"}, "not a file"),
        ({"path": "src/client.py", "lines": "25-40"}, "past the end"),
        ({"path": "src/client.py", "lines": "95-70"}, "backwards"),
        ({"path": "src/client.py", "lines": "0-3"}, "backwards"),
        ({"path": "src/client.py", "lines": "x"}, "not a range"),
        ({"path": "src/db.py", "symbol": "disconnect"}, "not in the file"),
        ({"path": "src/db.py", "symbol": "a b"}, "not a name"),
        ({"path": "src/db.py", "lines": "1-2", "symbol": "connect"}, "one of them"),
        ({"path": "src/db.py", "line": "1"}, "unknown citation key"),
        ({"path": ""}, "non-empty"),
        ("src/db.py", "mapping"),
    ],
)
def test_a_bad_citation_is_refused_and_nothing_is_stored(
    engine: MemoryEngine, repo: Path, cite: object, words: str
) -> None:
    with pytest.raises(InvalidInput, match=words) as caught:
        engine.store("note", cites=[cite], repo=repo)  # type: ignore[list-item]
    assert "\n" not in str(caught.value)
    assert engine.query() == []


def test_a_link_that_leaves_the_repository_is_refused(
    engine: MemoryEngine, repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("secret\n")
    os.symlink(tmp_path / "secret.txt", repo / "leak.txt")
    with pytest.raises(InvalidInput, match="leaves the repository"):
        engine.store("note", cites=[{"path": "leak.txt"}], repo=repo)
    assert engine.query() == []


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"metadata": {"cites": []}}, "reserved"),
        ({"cites": "README.md"}, "must be a list"),
        ({"cites": [{"path": "README.md"}] * 33}, "over the limit"),
    ],
)
def test_bad_cites_arguments_are_refused(
    engine: MemoryEngine, repo: Path, kwargs: dict[str, object], words: str
) -> None:
    with pytest.raises(InvalidInput, match=words):
        engine.store("note", repo=repo, **kwargs)  # type: ignore[arg-type]
    assert engine.query() == []


def test_a_folder_outside_git_is_refused_as_repo(engine: MemoryEngine, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "a.py").write_text("x = 1\n")
    with pytest.raises(InvalidInput, match="not in a git repository"):
        engine.store("note", cites=[{"path": "a.py"}], repo=tmp_path / "plain")


def test_store_many_refuses_the_whole_batch_for_one_bad_citation(
    engine: MemoryEngine, repo: Path
) -> None:
    with pytest.raises(InvalidInput, match=r"item 1: .*missing\.py"):
        engine.store_many(
            [
                {"content": "good", "cites": [{"path": "README.md"}], "repo": repo},
                {"content": "bad", "cites": [{"path": "missing.py"}], "repo": repo},
            ]
        )
    assert engine.query() == []
    (record,) = engine.store_many(
        [{"content": "good", "cites": [{"path": "README.md"}], "repo": str(repo)}]
    )
    assert record.metadata["cites"][0]["path"] == "README.md"


def test_the_repository_defaults_to_the_project_folder(
    store_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_SCOPE")
    monkeypatch.chdir(repo / "src")
    with MemoryEngine(store_path) as memory:
        record = memory.store("readme", cites=[{"path": "README.md"}])
        assert record.metadata["cites"][0]["root"] == str(repo.resolve())
        assert only_state(memory).state == "verified"


def test_a_repository_not_on_this_machine_is_unchecked(engine: MemoryEngine, repo: Path) -> None:
    engine.store("readme", cites=[{"path": "README.md"}], repo=repo)
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    state = only_state(engine)
    assert state.state == "unchecked"
    (hit,) = engine.query()
    assert hit.score_parts["citations"] == 1.0


def test_a_cited_memory_stored_and_verified_on_postgresql(pg_url: str, repo: Path) -> None:
    with MemoryEngine(pg_url) as memory:
        memory.store("connect opens", cites=[{"path": "src/db.py", "symbol": "connect"}], repo=repo)
        (hit,) = memory.query()
        (state,) = hit.citations
        assert (state.state, state.lines) == ("verified", "8-11")
        (repo / "src" / "db.py").write_text(DB.replace("return conn", "return None"))
        (hit,) = memory.query()
        assert hit.citations[0].state == "stale"


def test_an_engine_told_not_to_check_leaves_citations_unchecked(
    engine: MemoryEngine, repo: Path
) -> None:
    engine.store("changed", cites=[{"path": "README.md"}], repo=repo)
    (repo / "README.md").write_text("changed\n")
    with MemoryEngine(engine.path, scope="global", check_citations=False) as plain:
        (hit,) = plain.query()
    assert hit.citations == () and "citations" not in hit.score_parts
    assert only_state(engine).state == "stale"


def test_a_citation_at_a_commit_is_fingerprinted_from_that_commit(
    engine: MemoryEngine, repo: Path
) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 11\n", "line eleven\n"))
    git(repo, "commit", "-q", "-am", "second")
    (repo / "src" / "db.py").unlink()
    git(repo, "commit", "-q", "-am", "third")
    record = engine.store(
        "as reviewed in the first commit",
        cites=[
            {"path": "src/client.py", "lines": "10-12", "commit": first[:10]},
            {"path": "src/client.py", "lines": "1-3", "commit": first},
            {"path": "src/db.py", "symbol": "connect", "commit": "HEAD~2"},
        ],
        repo=repo,
    )
    assert [c["commit"] for c in record.metadata["cites"]] == [first, first, first]
    (hit,) = engine.query()
    assert [(s.path, s.state) for s in hit.citations] == [
        ("src/client.py", "stale"),  # changed since that commit
        ("src/client.py", "verified"),  # unchanged since
        ("src/db.py", "stale"),  # deleted since
    ]


@pytest.mark.parametrize(
    ("cite", "message"),
    [
        ({"path": "src/client.py", "commit": "--output=/tmp/x"}, "not a revision"),
        ({"path": "src/client.py", "commit": 7}, "not a revision"),
        ({"path": "src/client.py", "commit": "0" * 40}, "not in the repository"),
        ({"path": "src/later.py", "commit": "HEAD"}, "has no file src/later.py"),
        ({"path": "../outside.py", "commit": "HEAD"}, "climbs out"),
    ],
)
def test_a_bad_commit_in_a_citation_stores_nothing(
    engine: MemoryEngine, repo: Path, cite: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        engine.store("about code", cites=[cite], repo=repo)
    assert engine.stats().records == 0


def test_an_update_keeps_citations_unless_it_gives_new_ones(
    engine: MemoryEngine, repo: Path
) -> None:
    record = engine.store(
        "retries", cites=[{"path": "src/client.py", "lines": "10-12"}], repo=repo, metadata={"a": 1}
    )
    kept = record.metadata["cites"]
    updated = engine.update(record.record_id, metadata={"source": "review"})
    assert updated.metadata == {"source": "review", "cites": kept}
    updated = engine.update(record.record_id, content="the client retries three times")
    assert updated.metadata["cites"] == kept
    recited = engine.update(
        record.record_id, cites=[{"path": "src/db.py", "symbol": "connect"}], repo=repo
    )
    assert [c["path"] for c in recited.metadata["cites"]] == ["src/db.py"]
    assert recited.metadata["source"] == "review"
    assert "cites" not in engine.update(record.record_id, cites=[]).metadata


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"metadata": {"cites": []}}, "reserved"),
        ({"repo": "."}, "give cites"),
        ({"cites": "src/db.py"}, "list of citations"),
        ({"cites": [{"path": "../x.py"}]}, "climbs out"),
        ({"cites": [{"path": "src/client.py", "lines": "29-40"}]}, "past the end"),
    ],
)
def test_a_bad_update_of_citations_changes_nothing(
    engine: MemoryEngine, repo: Path, changes: dict[str, object], message: str
) -> None:
    record = engine.store("retries", cites=[{"path": "README.md"}], repo=repo)
    with pytest.raises(InvalidInput, match=message):
        engine.update(record.record_id, **({"repo": repo} if "cites" in changes else {}), **changes)
    assert engine.get(record.record_id) == record


def test_a_stale_memory_makes_room_for_the_next_one(engine: MemoryEngine, repo: Path) -> None:
    cited = engine.store(
        "retry policy of the client: three tries",
        cites=[{"path": "src/client.py", "lines": "10-12"}],
        repo=repo,
        importance=0.9,
    )
    plain = engine.store("retry policy of the uploader", importance=0.6)
    assert [h.record.record_id for h in engine.query(limit=1)] == [cited.record_id]
    (repo / "src" / "client.py").write_text("rewritten\n")
    [hit] = engine.query(limit=1)
    assert hit.record.record_id == plain.record_id  # 0.9 x 0.5 ranks below 0.6
    assert [h.record.record_id for h in engine.query(limit=2)] == [
        plain.record_id,
        cited.record_id,
    ]
