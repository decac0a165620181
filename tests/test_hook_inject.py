"""What hooks put before the agent, and that a hook never harms its host."""

from __future__ import annotations

import io
import itertools
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
from prime_memory_folding.capture import inject
from prime_memory_folding.capture.runtime import HookLog, run
from prime_memory_folding.engine.budget import count_tokens
from prime_memory_folding.storage.sqlite_peek import Peek
from tests.git_repos import make_repo

PROJECT = "project:github.com/acme/api"
OTHER = "project:github.com/acme/web"
USER = "user:alice"
NOW = 1_800_000_000.0


def _store(path: Path, memories: list[dict[str, Any]]) -> Path:
    with MemoryEngine(path, scope=PROJECT) as engine:
        if memories:
            engine.store_many(memories)
    return path


def _opening(path: Path, *, last: str | None = None, budget: int = 1000) -> inject.Block:
    with Peek(path) as peek:
        return inject.opening(
            peek, scope=PROJECT, user_scope=USER, last_session=last, budget=budget, now=NOW
        )


def _relevant(path: Path, prompt: str, **options: Any) -> inject.Block:
    options.setdefault("scopes", (PROJECT, USER, "global"))
    options.setdefault("session", "now")
    options.setdefault("seen", set())
    with Peek(path) as peek:
        return inject.relevant(peek, prompt, **options)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return _store(
        tmp_path / "memory.db",
        [
            {
                "content": "Timestamps are stored as ISO 8601 UTC strings everywhere.",
                "domain": "decision",
                "importance": 0.9,
            },
            {
                "content": "Run the test suite with pytest -n 2 before each commit.",
                "domain": "convention",
                "importance": 0.7,
            },
            {
                "content": "The web app deploys through Vercel previews.",
                "domain": "decision",
                "scope": OTHER,
            },
            {"content": "Prefers short commit messages.", "domain": "preference", "scope": USER},
            {
                "content": "Rename the billing tables next sprint",
                "domain": "session",
                "subdomain": "prompt",
                "session": "old",
            },
        ],
    )


def test_the_opening_holds_the_project_s_durable_memories_and_no_other_project_s(
    store: Path,
) -> None:
    block = _opening(store)
    assert "ISO 8601" in block.text and "pytest -n 2" in block.text
    assert "Prefers short commit messages" in block.text
    assert "Vercel" not in block.text
    assert block.text.index("ISO 8601") < block.text.index("pytest -n 2")  # importance first
    assert block.text.splitlines()[-1] == inject.TOOLS_LINE


def test_the_opening_says_what_the_last_session_left(store: Path) -> None:
    assert "Rename the billing tables" in _opening(store, last="old").text
    assert "Rename the billing tables" not in _opening(store).text


def test_an_empty_store_gets_one_short_line(tmp_path: Path) -> None:
    block = _opening(_store(tmp_path / "memory.db", []))
    assert block.text == inject.EMPTY_LINE and block.record_ids == ()


def test_a_prompt_gets_the_memory_it_bears_on(store: Path) -> None:
    block = _relevant(store, "how should timestamps be stored, ISO or epoch?")
    assert "ISO 8601" in block.text and len(block.record_ids) == 1


def test_an_unrelated_prompt_gets_nothing(store: Path) -> None:
    assert _relevant(store, "write a haiku about autumn leaves") == inject.Block("", ())


def test_a_memory_already_shown_or_of_the_same_session_is_left_out(store: Path) -> None:
    first = _relevant(store, "how should timestamps be stored?")
    assert (
        _relevant(store, "how should timestamps be stored?", seen=set(first.record_ids)).text == ""
    )
    with MemoryEngine(store, scope=PROJECT) as engine:
        engine.store("Timestamps in this session are local", domain="memory", session="now")
    assert "local" not in _relevant(store, "how are timestamps stored in this session").text


def test_a_higher_threshold_shows_a_subset(store: Path) -> None:
    prompt = "commit timestamps pytest stored suite"
    shown = [
        set(_relevant(store, prompt, threshold=t).record_ids) for t in (0.0, 0.2, 0.5, 0.8, 1.01)
    ]
    assert all(later <= earlier for earlier, later in itertools.pairwise(shown))
    assert shown[-1] == set()


_WORDS = st.sampled_from(
    [
        "deploy",
        "timestamps",
        "cache",
        "redis",
        "postgres",
        "billing",
        "auth",
        "token",
        "retry",
        "queue",
        "worker",
        "schema",
        "migration",
        "index",
        "latency",
        "parser",
        "lexer",
        "render",
        "widget",
        "theme",
    ]
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    memories=st.lists(
        st.fixed_dictionaries(
            {
                "content": st.lists(_WORDS, min_size=1, max_size=80).map(" ".join),
                "domain": st.sampled_from([*inject.DURABLE_DOMAINS, "session", "memory"]),
                "importance": st.floats(0, 1),
            }
        ),
        max_size=40,
    ),
    budget=st.integers(1, 1500),
    prompt=st.lists(_WORDS, min_size=1, max_size=12).map(" ".join),
)
def test_blocks_never_exceed_their_budgets(
    tmp_path_factory: pytest.TempPathFactory,
    memories: list[dict[str, Any]],
    budget: int,
    prompt: str,
) -> None:
    path = _store(tmp_path_factory.mktemp("store") / "memory.db", memories)
    assert count_tokens(_opening(path, budget=budget).text) <= budget
    block = _relevant(path, prompt, budget=budget, threshold=0.0)
    assert count_tokens(block.text) <= budget


# -- a hook never harms its host ---------------------------------------------------


def _run(event: str, payload: bytes | str, host: str = "claude-code") -> tuple[int, str]:
    out = io.StringIO()
    code = run(event, host, payload, out=out, clock=lambda: NOW)
    return code, out.getvalue()


def _log() -> str:
    path = HookLog().path
    return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.mark.parametrize(
    "payload", [b"", b"not json", b"[1, 2]", b'{"prompt": 3}', b"\xff\xfe", b'{"cwd": {}}']
)
@pytest.mark.parametrize("event", ["session-start", "prompt", "tool", "stop"])
def test_garbage_on_stdin_costs_one_log_line(event: str, payload: bytes) -> None:
    before = _log().count("\n")
    assert _run(event, payload) == (0, "")
    assert _log().count("\n") == before + 1


def test_a_missing_store_is_an_empty_one(memory_home: Path) -> None:
    code, out = _run("session-start", json.dumps({"session_id": "s", "cwd": str(memory_home)}))
    assert (
        code == 0
        and inject.EMPTY_LINE in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    )
    assert _run("prompt", json.dumps({"session_id": "s", "prompt": "deploy steps?"})) == (0, "")
    assert not (memory_home / "memory.db").exists()


def test_a_broken_store_costs_a_log_line_not_the_prompt(memory_home: Path) -> None:
    (memory_home / "memory.db").write_text("this is not a database")
    assert _run("prompt", json.dumps({"session_id": "s", "prompt": "deploy the api now"})) == (
        0,
        "",
    )
    assert "StoreError" in _log()


def test_a_locked_store_costs_a_log_line_not_the_prompt(memory_home: Path) -> None:
    path = _store(
        memory_home / "memory.db", [{"content": "deploy with helm", "domain": "decision"}]
    )
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert _run("prompt", json.dumps({"session_id": "s", "prompt": "deploy with helm?"})) == (
            0,
            "",
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "locked" in _log()


def _hook_process(
    args: list[str], payload: bytes, home: Path
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PRIME_MEMORY_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-c", "from prime_memory_folding.console import main; main()", *args],
        input=payload,
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["hook", "prompt"],
        ["hook", "no-such-event"],
        ["hook", "prompt", "--host", "nowhere"],
        ["hook", "prompt", "--budget", "many"],
        ["hook"],
    ],
)
def test_the_hook_process_exits_0_and_is_silent_on_standard_error(
    args: list[str], memory_home: Path
) -> None:
    done = _hook_process(args, b"\x00garbage", memory_home)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert (memory_home / "hooks.log").read_text(encoding="utf-8").count("\n") == 1


def test_a_prompt_about_what_the_store_does_not_know_gets_nothing(store: Path) -> None:
    # It shares "stored" and "timestamps" with a memory, but most of its weight
    # is in words no memory holds.
    prompt = "are kafka offsets and zookeeper quorum timestamps stored by the broker cluster?"
    assert _relevant(store, prompt).text == ""
    assert "ISO 8601" in _relevant(store, "are timestamps stored as ISO strings?").text


def test_the_end_of_a_turn_starts_a_detached_drain_that_stores_it(
    memory_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIME_MEMORY_HOOK_FOREGROUND", raising=False)
    started: list[tuple[list[str], dict[str, Any]]] = []
    payload = {"session_id": "s", "cwd": str(memory_home)}
    answer = "Deploys use Helm now, with one chart per service and values per stage."
    with monkeypatch.context() as patched:
        patched.setattr(
            "prime_memory_folding.capture.runtime.subprocess.Popen",
            lambda argv, **options: started.append((argv, options)),
        )
        prompt = {**payload, "prompt": "We decided to deploy with Helm charts."}
        _run("prompt", json.dumps(prompt))
        stop = {**payload, "last_assistant_message": answer}
        assert _run("stop", json.dumps(stop)) == (0, "")
    ((argv, options),) = started
    assert options["start_new_session"] is True
    assert all(options[k] == subprocess.DEVNULL for k in ("stdin", "stdout", "stderr"))
    # The process it would start, run here to its end: it stores the turn and exits.
    done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    with MemoryEngine(memory_home / "memory.db") as engine:
        kept = {(h.record.domain, h.record.session) for h in engine.query(scopes=["*"])}
    assert kept == {("decision", "s"), ("session", "s")}


@pytest.fixture
def cited(tmp_path: Path) -> tuple[Path, Path]:
    """A git repository and a store whose two decisions cite its code."""
    steps = "".join(f"step {n}\n" for n in range(1, 21))
    root = make_repo(
        tmp_path / "repo", {"retry.py": steps, "pool.py": "def connect():\n    return 1\n"}
    )
    path = tmp_path / "memory.db"
    with MemoryEngine(path, scope=PROJECT) as engine:
        engine.store(
            "Retry logic walks the backoff steps in retry.py",
            domain="decision",
            importance=0.9,
            cites=[{"path": "retry.py", "lines": "3-5"}],
            repo=root,
        )
        engine.store(
            "Connections come from connect() in the pool module",
            domain="decision",
            importance=0.8,
            cites=[{"path": "pool.py", "symbol": "connect"}],
            repo=root,
        )
    return root, path


def test_injected_memories_say_when_their_code_moved_or_went_stale(
    cited: tuple[Path, Path],
) -> None:
    root, path = cited
    text = _opening(path).text
    assert "Retry logic" in text and "code changed" not in text and "code moved" not in text
    assert text.index("Retry logic") < text.index("Connections come")

    lines = (root / "retry.py").read_text().splitlines(keepends=True)
    (root / "retry.py").write_text("new first\nnew second\n" + "".join(lines))
    text = _opening(path).text
    assert "(code moved: now retry.py:5-7)" in text

    (root / "retry.py").write_text("rewritten\n")
    text = _opening(path).text
    assert "Retry logic walks the backoff steps in retry.py (code changed since: retry.py)" in text
    # Stale ranks lower: the memory of less importance whose code holds now leads.
    assert text.index("Connections come") < text.index("Retry logic")


def test_a_prompt_s_stale_memory_ranks_below_the_threshold_it_cleared(
    cited: tuple[Path, Path],
) -> None:
    root, path = cited
    prompt = "how does the retry logic walk its backoff steps for uploads"
    before = _relevant(path, prompt)
    assert "Retry logic" in before.text
    with Peek(path) as peek:
        [first, *_] = inject.scored(peek, prompt, (PROJECT,))
    assert first.row.content.startswith("Retry logic") and 0.5 <= first.relevance < 1.0
    (root / "retry.py").unlink()
    assert _relevant(path, prompt).record_ids == ()  # halved, it falls below 0.5
    everything = _relevant(path, prompt, threshold=0.0)
    assert "Retry logic walks the backoff steps in retry.py (code changed since: retry.py)" in (
        everything.text
    )
