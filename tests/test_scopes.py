"""Scopes: names, resolution, identity per scope, visibility, and everything that respects them."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import Filters, InvalidInput, MemoryEngine, NotFound
from prime_memory_folding.core.address import unpack
from prime_memory_folding.core.scopes import (
    GLOBAL,
    MAX_SCOPE_CHARS,
    SCOPE_ENV,
    git_root,
    normalise_remote,
    normalise_scope,
    origin_url,
    resolve,
)
from prime_memory_folding.fold.folding import FoldPolicy
from prime_memory_folding.storage.migrations import latest_version
from prime_memory_folding.transfer.packs import export_pack, import_pack
from tests.backends import emptied, examples
from tests.conftest import FakeClock
from tests.old_stores import build_store


@pytest.fixture
def engine(backend_engine: MemoryEngine) -> MemoryEngine:
    """The engine of these tests runs on each backend."""
    return backend_engine


# -- names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("global", "global"),
        ("  GLOBAL ", "global"),
        ("user:Alice", "user:alice"),
        ("Project:github.com/Acme/API", "project:github.com/acme/api"),
        ("team: Platform Team ", "team:platform_team"),
        ("project:/home/me/notes", "project:/home/me/notes"),
    ],
)
def test_scope_names_are_normalised_like_labels(given: str, expected: str) -> None:
    assert normalise_scope(given) == expected


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("planet:earth", "not a scope kind"),
        ("acme", "no kind"),
        ("user:", "needs a name"),
        ("global:x", "takes no name"),
        ("user:al\x00ice", "control"),
        ("user:al\nice", "control"),
        ("user:\u200bx", "control or invisible"),
        ("user:" + "x" * MAX_SCOPE_CHARS, "over the limit"),
        ("*", "every scope"),
        (42, "must be a string"),
        (None, "must be a string"),
    ],
)
def test_malformed_scopes_are_clear_errors_and_write_nothing(
    engine: MemoryEngine, bad: Any, says: str
) -> None:
    with pytest.raises(InvalidInput, match=says):
        normalise_scope(bad)
    if bad is None:
        return  # None means "the current scope" to store()
    with pytest.raises(InvalidInput, match=says):
        engine.store("a note", scope=bad)
    with pytest.raises(InvalidInput, match=says):
        engine.store_many([{"content": "a note", "scope": bad}])
    assert engine.stats().records == 0


def test_a_read_rejects_a_malformed_scope_and_a_bare_string(engine: MemoryEngine) -> None:
    engine.store("a note")
    with pytest.raises(InvalidInput, match="not a scope kind"):
        engine.query(scopes=["planet:earth"])
    with pytest.raises(InvalidInput, match="wrap it"):
        engine.match_ids(scopes="global")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:Acme/api.git", "github.com/acme/api"),
        ("git@github.com:acme/api", "github.com/acme/api"),
        ("ssh://git@github.com/acme/api", "github.com/acme/api"),
        ("ssh://git@github.com/acme/api.git", "github.com/acme/api"),
        ("ssh://git@github.com:22/acme/api.git", "github.com/acme/api"),
        ("ssh://git@GITHUB.COM:2222/Acme/API.git/", "github.com/acme/api"),
        ("https://github.com/acme/api", "github.com/acme/api"),
        ("https://github.com/acme/api.git", "github.com/acme/api"),
        ("https://github.com/acme/api/", "github.com/acme/api"),
        ("https://user:s3cret@github.com:443/acme/api.git", "github.com/acme/api"),
        ("HTTPS://GitHub.com/ACME/Api.GIT", "github.com/acme/api"),
        ("http://gitlab.example.org:8080/group/sub/repo.git", "gitlab.example.org/group/sub/repo"),
        ("git://example.org/acme/api.git", "example.org/acme/api"),
        ("example.org:acme/api.git", "example.org/acme/api"),
        ("file:///srv/git/api.git", "/srv/git/api"),
        ("/srv/git/api.git", "/srv/git/api"),
    ],
)
def test_remote_urls_normalise_to_one_project_id(url: str, expected: str) -> None:
    assert normalise_remote(url) == expected


def test_a_relative_local_remote_is_taken_from_the_repository(tmp_path: Path) -> None:
    assert normalise_remote("../api.git", tmp_path / "clone") == str(tmp_path / "api")


# -- resolution -----------------------------------------------------------------------


def _repo(path: Path, origin: str | None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    if origin is not None:
        subprocess.run(["git", "-C", str(path), "remote", "add", "origin", origin], check=True)
    return path


def test_resolution_order_is_argument_env_project_claude_git_roots_global(
    tmp_path: Path,
) -> None:
    a = _repo(tmp_path / "a", "git@github.com:Acme/A.git")
    b = _repo(tmp_path / "b", "https://github.com/acme/b")
    c = _repo(tmp_path / "c", "https://github.com/acme/c")
    d = _repo(tmp_path / "d", "https://github.com/acme/d")
    plain = tmp_path / "plain"
    plain.mkdir()
    everything = {"cwd": a / "src", "roots": [d]}
    (a / "src").mkdir()
    env = {SCOPE_ENV: "team:core", "CLAUDE_PROJECT_DIR": str(c)}

    def current(**kwargs: Any) -> tuple[str, str]:
        found = resolve(user="me", **kwargs)
        return found.current, found.source

    assert current(scope="user:x", project=b, env=env, **everything) == ("user:x", "argument")
    assert current(project=b, env=env, **everything) == ("team:core", "env")
    env.pop(SCOPE_ENV)
    assert current(project=b, env=env, **everything) == ("project:github.com/acme/b", "project")
    assert current(env=env, **everything) == ("project:github.com/acme/c", "claude_project_dir")
    assert current(env={}, **everything) == ("project:github.com/acme/a", "git")
    assert current(env={}, cwd=plain, roots=[d]) == ("project:github.com/acme/d", "roots")
    assert current(env={}, cwd=plain) == (GLOBAL, "default")


def test_a_resolution_says_why_and_sees_current_user_and_global(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r", "https://bob:hunter2@example.org/team/r.git")
    found = resolve(cwd=repo, env={}, user="Bob")
    assert found.current == "project:example.org/team/r"
    assert found.visible == ("project:example.org/team/r", "user:bob", GLOBAL)
    assert "git origin" in found.reason and str(repo) in found.reason
    assert "hunter2" not in found.reason
    assert found.as_dict()["visible"] == list(found.visible)
    nowhere = resolve(cwd=tmp_path, env={}, user="bob")
    assert nowhere.visible == (GLOBAL, "user:bob")  # the current scope comes first
    assert "not in a git repository" in nowhere.reason


def test_a_repository_without_origin_and_a_plain_project_folder_use_their_paths(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path / "Repo", None)
    (repo / "deep" / "er").mkdir(parents=True)
    found = resolve(cwd=repo / "deep" / "er", env={}, user="u")
    assert found.current == normalise_scope(f"project:{repo.resolve()}")
    folder = tmp_path / "notes"
    folder.mkdir()
    by_flag = resolve(project=folder, env={}, user="u")
    assert by_flag.current == normalise_scope(f"project:{folder.resolve()}")
    assert "not in a git repository" in by_flag.reason


def test_worktrees_share_their_repository_origin(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "main", "git@example.org:acme/api.git")
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit",
         "-q", "--allow-empty", "-m", "start"],
        check=True,
    )  # fmt: skip
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "-q", str(tmp_path / "wt")], check=True
    )
    assert git_root(tmp_path / "wt") == (tmp_path / "wt").resolve()
    assert origin_url(tmp_path / "wt") == "git@example.org:acme/api.git"
    assert resolve(cwd=tmp_path / "wt", env={}, user="u").current == "project:example.org/acme/api"


def test_an_unexpanded_project_variable_falls_through_to_the_next_rule(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", "https://example.org/acme/x")
    found = resolve(project="${workspaceFolder}", cwd=repo, env={}, user="u")
    assert (found.current, found.source) == ("project:example.org/acme/x", "git")
    assert "not expanded" in found.reason


def test_bad_scope_settings_are_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=SCOPE_ENV):
        resolve(env={SCOPE_ENV: "bogus"}, cwd=tmp_path)
    with pytest.raises(InvalidInput, match="does not exist"):
        resolve(project=tmp_path / "missing", env={}, cwd=tmp_path)
    with pytest.raises(InvalidInput):
        MemoryEngine(":memory:", scope="bogus")


def test_the_engine_resolves_its_scope_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path / "repo", "https://example.org/acme/widgets.git")
    monkeypatch.delenv(SCOPE_ENV)
    monkeypatch.chdir(repo)
    with MemoryEngine(":memory:") as memory:
        who = memory.whoami()
        assert who.current == "project:example.org/acme/widgets"
        assert who.source == "git"
        assert memory.store("a decision").scope == who.current
        assert memory.stats().current_scope == who.current


# -- identity -------------------------------------------------------------------------


def test_the_same_memory_in_two_scopes_is_two_records(engine: MemoryEngine) -> None:
    here = engine.store_result("use uv", tags=["tooling"], scope="project:a")
    there = engine.store_result("use uv", tags=["tooling"], scope="project:b")
    assert here.created and there.created
    assert here.record.record_id != there.record.record_id
    again = engine.store_result("use uv", tags=["tooling"], scope="project:a")
    assert not again.created
    assert again.record.record_id == here.record.record_id
    assert again.record.access_count == 1
    assert engine.get(there.record.record_id).access_count == 0
    # Same labels, so the same primes: only the bucket lane tells the scopes apart.
    a, b = unpack(here.record.address), unpack(there.record.address)
    assert a[:2] == b[:2] and a[2] != b[2]


def test_global_records_keep_the_addresses_they_had_before_scopes(engine: MemoryEngine) -> None:
    from prime_memory_folding.core.address import concept_bucket

    record = engine.store("a fact", domain="fact", tags=["x"], scope="global")
    assert unpack(record.address)[2] == concept_bucket("fact", "general", ("x",))
    assert concept_bucket("fact", "general", ("x",), "global") == concept_bucket(
        "fact", "general", ("x",)
    )


def test_encode_is_a_pure_function_of_its_arguments_and_scope(engine: MemoryEngine) -> None:
    first = engine.encode("decision", tags=["db"], instance_key="k", scope="project:a")
    assert engine.encode("decision", tags=["db"], instance_key="k", scope="project:a") == first
    other = engine.encode("decision", tags=["db"], instance_key="k", scope="project:b")
    assert other.record_id != first.record_id
    assert engine.stats().records == 0
    stored = engine.store("x", domain="decision", tags=["db"], instance_key="k", scope="project:a")
    assert stored.record_id == first.record_id
    assert engine.encode("decision", tags=["db"], instance_key="k") == engine.encode(
        "decision", tags=["db"], instance_key="k", scope=engine.whoami().current
    )


def test_a_record_keeps_its_id_when_it_moves(engine: MemoryEngine, clock: FakeClock) -> None:
    record = engine.store("deploy with make ship", scope="project:a")
    clock.advance(10)
    [moved] = engine.rescope([record.record_id], "project:b")
    assert moved.record_id == record.record_id and moved.scope == "project:b"
    assert moved.updated_at == clock.now
    assert engine.get(record.record_id).scope == "project:b"
    assert engine.match_ids(scopes=["project:a"]) == []
    # Storing it again in its old scope makes a new record; in its new scope, reinforces.
    fresh = engine.store_result("deploy with make ship", scope="project:a")
    assert fresh.created and fresh.record.record_id != record.record_id
    back = engine.store_result("deploy with make ship", scope="project:b")
    assert not back.created and back.record.record_id == record.record_id
    # Moving onto an identical record is refused, and nothing moves.
    with pytest.raises(InvalidInput, match="Nothing was moved"):
        engine.rescope([record.record_id], "project:a")
    assert engine.get(record.record_id).scope == "project:b"
    with pytest.raises(NotFound, match="nothing was moved"):
        engine.rescope([fresh.record.record_id, "f" * 32], "team:x")
    assert engine.get(fresh.record.record_id).scope == "project:a"
    assert engine.rescope([record.record_id], "project:b") == []  # already there
    updated = engine.update(fresh.record.record_id, scope="user:me")
    assert updated.scope == "user:me" and updated.record_id == fresh.record.record_id


# -- visibility ------------------------------------------------------------------------


def test_a_read_sees_current_user_and_global_by_default(backend_store: str) -> None:
    with MemoryEngine(backend_store, scope="project:a") as writer:
        writer.store("mine", scope="project:a")
        writer.store("theirs", scope="project:b")
        writer.store("shared", scope="global")
        writer.store("my taste", scope=writer.whoami().user)
        writer.store("someone else's taste", scope="user:someone_else")
        seen = {h.record.content for h in writer.query(limit=50)}
        assert seen == {"mine", "shared", "my taste"}
        assert {h.record.content for h in writer.query(scopes=["*"], limit=50)} == {
            "mine",
            "theirs",
            "shared",
            "my taste",
            "someone else's taste",
        }
        assert writer.query(scopes=["project:b"])[0].record.content == "theirs"
        assert writer.query(scopes=["team:unknown"]) == []
        assert writer.match_ids(scopes=[]) == []
        counts = writer.stats().scopes
        assert counts == {
            "global": 1,
            "project:a": 1,
            "project:b": 1,
            writer.whoami().user: 1,
            "user:someone_else": 1,
        }


SCOPES = ["global", "project:a", "project:b", "user:u", "team:t"]
TAGS = ["a", "b", "c", "d"]
DOMAINS = ["memory", "task"]

scoped_records = st.lists(
    st.tuples(
        st.sampled_from(SCOPES),
        st.sampled_from(DOMAINS),
        st.sets(st.sampled_from(TAGS), max_size=3),
    ),
    max_size=40,
)


def test_every_hit_lies_in_the_visible_scopes(backend_store: str) -> None:
    @examples(backend_store, sqlite=60, postgres=25)
    @given(
        scoped_records,
        st.one_of(
            st.none(),
            st.just(["*"]),
            st.lists(st.sampled_from([*SCOPES, "team:nobody"]), max_size=4),
        ),
        st.sampled_from([None, *DOMAINS]),
        st.sets(st.sampled_from(TAGS), max_size=2),
        st.lists(st.integers(0, 39), max_size=5),
    )
    def check(
        items: list[tuple[str, str, set[str]]],
        visible: list[str] | None,
        domain: str | None,
        tags: set[str],
        moves: list[int],
    ) -> None:
        hits_lie_in_visible_scopes(backend_store, items, visible, domain, tags, moves)

    check()


def hits_lie_in_visible_scopes(
    store: str,
    items: list[tuple[str, str, set[str]]],
    visible: list[str] | None,
    domain: str | None,
    tags: set[str],
    moves: list[int],
) -> None:
    with MemoryEngine(emptied(store), scope="project:a", embedder="none") as memory:
        stored = memory.store_many(
            [
                {"content": f"record {i}", "scope": s, "domain": d, "tags": sorted(t)}
                for i, (s, d, t) in enumerate(items)
            ]
        )
        truth = {r.record_id: (s, d, t) for r, (s, d, t) in zip(stored, items)}
        # Moves change a record's scope after it was indexed.
        for n in moves:
            if n < len(stored):
                rid = stored[n].record_id
                target = SCOPES[(SCOPES.index(truth[rid][0]) + 1) % len(SCOPES)]
                try:
                    memory.rescope([rid], target)
                except InvalidInput:
                    continue  # an identical record is already there
                truth[rid] = (target, *truth[rid][1:])
        if visible is None:
            allowed = set(memory.whoami().visible)
        elif visible == ["*"]:
            allowed = set(SCOPES)
        else:
            allowed = set(visible)
        expected = {
            rid
            for rid, (s, d, t) in truth.items()
            if s in allowed and (domain is None or d == domain) and tags <= t
        }
        found = memory.match_ids(scopes=visible, domain=domain, tags=sorted(tags))
        assert set(found) == expected and len(found) == len(expected)
        hits = memory.query(scopes=visible, domain=domain, tags=sorted(tags), limit=100)
        assert {h.record.record_id for h in hits} == expected
        assert all(h.record.scope in allowed for h in hits)


# -- everything respects scopes ------------------------------------------------------------


def test_folding_never_merges_across_scopes(engine: MemoryEngine) -> None:
    vector = [1.0, 0.0, 0.0]
    text = "the build uses make and the release uses make ship"
    for scope in ("project:a", "project:b"):
        engine.store(text, tags=["build"], vector=vector, scope=scope)
        engine.store(text + " today", tags=["build"], vector=vector, scope=scope)
    report = engine.fold(policy=FoldPolicy(similarity=0.5, word_overlap=0.3))
    assert report.created == 2 and report.folded == 4
    by_scope = engine.stats().scopes
    assert by_scope == {"project:a": 1, "project:b": 1}
    for created in report.created_ids:
        folded = engine.get(created)
        members = [engine.unfold(created)][0]
        assert {m.scope for m in members} == {folded.scope}


def test_packs_keep_scopes_and_can_select_or_move_them(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    engine.store("alpha", scope="project:a")
    engine.store("beta", scope="project:b")
    engine.store("gamma", scope="global")
    out = io.StringIO()
    assert export_pack(engine, out).records == 3  # every scope by default
    lines = [json.loads(line) for line in out.getvalue().splitlines()[1:]]
    assert {line["content"]: line["scope"] for line in lines} == {
        "alpha": "project:a",
        "beta": "project:b",
        "gamma": "global",
    }
    only = io.StringIO()
    assert export_pack(engine, only, filters=Filters(scopes=["project:b"])).records == 1
    pack = tmp_path / "all.jsonl"
    pack.write_text(out.getvalue(), encoding="utf-8")
    with MemoryEngine(tmp_path / "copy.db", scope="project:z") as copy:
        report = import_pack(copy, pack)
        assert report.added_per_scope == {"global": 1, "project:a": 1, "project:b": 1}
        assert {r: copy.get(r).scope for r in copy.match_ids(scopes=["*"])} == {
            line["record_id"]: line["scope"] for line in lines
        }
    with MemoryEngine(tmp_path / "picked.db", scope="project:z") as picked:
        report = import_pack(picked, pack, scopes=["project:a", "global"])
        assert report.not_selected == 1
        assert picked.stats().scopes == {"global": 1, "project:a": 1}
    with MemoryEngine(tmp_path / "both.db", scope="project:z") as both:
        report = import_pack(both, pack, scope="team:x", scopes=["project:b"])
        assert (report.not_selected, both.stats().scopes) == (2, {"team:x": 1})
        assert both.query(scopes=["team:x"])[0].record.content == "beta"
    with MemoryEngine(tmp_path / "moved.db", scope="project:z") as moved:
        import_pack(moved, pack, scope="team:x")
        assert moved.stats().scopes == {"team:x": 3}
        assert sorted(moved.match_ids(scopes=["*"])) == sorted(line["record_id"] for line in lines)
    old = tmp_path / "old.jsonl"
    old.write_text(
        "\n".join(
            [out.getvalue().splitlines()[0]]
            + [json.dumps({k: v for k, v in line.items() if k != "scope"}) for line in lines]
        ),
        encoding="utf-8",
    )
    with MemoryEngine(tmp_path / "from-old.db", scope="project:z") as current:
        import_pack(current, old)
        assert current.stats().scopes == {"project:z": 3}


@pytest.mark.parametrize("version", range(1, 6))
def test_every_older_schema_migrates_its_records_into_global(tmp_path: Path, version: int) -> None:
    assert latest_version() > 5
    source = tmp_path / "source.db"
    with MemoryEngine(source, scope="global", embedder="none") as memory:
        kept = [memory.store(f"note {i}", tags=["t"]) for i in range(3)]
        archived = memory.store("old note", importance=0.1)
    columns = (
        "record_id, dedupe_key, domain, subdomain, tags, tag_product, content, vector, "
        "importance, strength, created_at, updated_at, accessed_at, access_count, metadata, "
        "instance_key"
    )
    reader = sqlite3.connect(source)
    rows = reader.execute(f"SELECT {columns} FROM records ORDER BY id").fetchall()
    primes = reader.execute("SELECT kind, label, prime FROM primes").fetchall()
    reader.close()
    old = tmp_path / "old.db"
    build_store(old, version)
    db = sqlite3.connect(old, isolation_level=None)
    db.executemany(f"INSERT INTO records ({columns}) VALUES ({','.join('?' * 16)})", rows)
    db.executemany("INSERT OR IGNORE INTO primes (kind, label, prime) VALUES (?, ?, ?)", primes)
    db.close()
    with MemoryEngine(old, scope="project:new", embedder="none") as memory:
        assert memory.storage.schema_version() == latest_version()
        assert memory.stats().scopes == {"global": 4}
        # Global is visible from any project, and the old ids and identities hold.
        assert sorted(memory.match_ids()) == sorted(r.record_id for r in [*kept, archived])
        again = memory.store_result("note 0", tags=["t"], scope="global")
        assert not again.created and again.record.record_id == kept[0].record_id
        if version >= 3:
            report = memory.fold(now=archived.created_at + 400 * 86_400)
            assert archived.record_id in report.pruned_ids
            assert memory.restore(archived.record_id).scope == GLOBAL


def test_an_incremental_fold_never_merges_across_scopes(engine: MemoryEngine) -> None:
    vector = [0.0, 1.0, 0.0]
    policy = FoldPolicy(similarity=0.5, word_overlap=0.3)
    engine.store("an unrelated note about lunch", vector=[1.0, 0.0, 0.0])
    first = engine.fold(policy=policy)  # full: there is no earlier fold
    assert first.created == 0
    text = "the deploy script tags the release and pushes the image"
    engine.store(text, tags=["deploy"], vector=vector, scope="project:a")
    engine.store(text + " today", tags=["deploy"], vector=vector, scope="project:b")
    second = engine.fold(policy=policy)
    assert second.incremental and second.created == 0
    engine.store(text + " again", tags=["deploy"], vector=vector, scope="project:a")
    third = engine.fold(policy=policy)
    assert third.incremental and third.created == 1
    assert engine.get(third.created_ids[0]).scope == "project:a"
    assert engine.stats().scopes == {"global": 1, "project:a": 1, "project:b": 1}


def test_a_git_repository_at_the_home_folder_is_not_a_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _repo(tmp_path / "home", "https://example.org/me/dotfiles")
    monkeypatch.setenv("HOME", str(home))
    (home / "notes").mkdir()
    found = resolve(cwd=home / "notes", env={}, user="me")
    assert (found.current, found.source) == (GLOBAL, "default")
    inside = _repo(home / "work" / "api", "https://example.org/me/api")
    assert resolve(cwd=inside, env={}, user="me").current == "project:example.org/me/api"
