"""Recorded sessions replayed through the hook commands, exactly as Claude Code calls them.

Each call runs the console script's code in a process of its own with the
host's JSON on standard input (the fields Claude Code's hooks reference
documents: session_id, transcript_path, cwd, hook_event_name, prompt,
tool_name, tool_input, tool_response, error, last_assistant_message), and the
transcripts are JSON Lines as Claude Code writes them. Sessions run in two
projects; drains run in the hook's process (PRIME_MEMORY_HOOK_FOREGROUND=1),
so that each check sees what the session stored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import MemoryEngine

#: Realistic fake secrets the sessions leak: none may be stored or logged.
SECRETS = (
    "Sup3rS3cret!",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "AKIAIOSFODNN7EXAMPLE",
    "sk_live_51HxQmPLbV0wKc7yZ9aBcDeFgHiJ",
    "hunter2-staging",
)


#: The console script's code, as the installed ``prime-memory hook`` runs it.
HOOK = [sys.executable, "-c", "from prime_memory_folding.console import main; main()", "hook"]


def _git_project(root: Path, origin: str) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", origin], check=True)
    return root


class Host:
    """Claude Code, as far as its hooks see it: one process per hook, JSON on stdin."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("PRIME_MEMORY_SCOPE", "CLAUDE_PROJECT_DIR")
        }
        self.env.update(PRIME_MEMORY_HOME=str(home), PRIME_MEMORY_HOOK_FOREGROUND="1")

    def call(self, event: str, payload: dict[str, Any]) -> str:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "from prime_memory_folding.console import main; main()",
                "hook",
                event,
                "--host",
                "claude-code",
            ],
            input=json.dumps(payload).encode(),
            capture_output=True,
            env=self.env,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, b"")
        if not done.stdout.strip():
            return ""
        answer = json.loads(done.stdout)
        return str(answer["hookSpecificOutput"]["additionalContext"])


class Session:
    """One recorded session: what the host sends, and the transcript it keeps."""

    def __init__(self, host: Host, session_id: str, cwd: Path, transcripts: Path) -> None:
        self.host = host
        self.base = {
            "session_id": session_id,
            "transcript_path": str(transcripts / f"{session_id}.jsonl"),
            "cwd": str(cwd),
        }
        self.transcript = Path(self.base["transcript_path"])
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        self.transcript.touch()
        self.cwd = cwd

    def _record(self, kind: str, content: Any) -> None:
        entry = {
            "type": kind,
            "sessionId": self.base["session_id"],
            "cwd": str(self.cwd),
            "message": {"role": kind, "content": content},
        }
        with self.transcript.open("a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\n")

    def start(self) -> str:
        return self.host.call(
            "session-start", {**self.base, "hook_event_name": "SessionStart", "source": "startup"}
        )

    def prompt(self, text: str) -> str:
        self._record("user", text)
        return self.host.call(
            "prompt", {**self.base, "hook_event_name": "UserPromptSubmit", "prompt": text}
        )

    def tool(self, name: str, tool_input: dict[str, Any], response: Any) -> None:
        self._record("assistant", [{"type": "tool_use", "name": name, "input": tool_input}])
        self.host.call(
            "tool",
            {
                **self.base,
                "hook_event_name": "PostToolUse",
                "tool_name": name,
                "tool_input": tool_input,
                "tool_response": response,
            },
        )

    def failed_tool(self, name: str, tool_input: dict[str, Any], error: str) -> None:
        self.host.call(
            "tool",
            {
                **self.base,
                "hook_event_name": "PostToolUseFailure",
                "tool_name": name,
                "tool_input": tool_input,
                "error": error,
            },
        )

    def stop(self, answer: str, *, in_payload: bool) -> None:
        self._record("assistant", [{"type": "text", "text": answer}])
        payload = {**self.base, "hook_event_name": "Stop", "stop_hook_active": False}
        if in_payload:
            payload["last_assistant_message"] = answer
        self.host.call("stop", payload)

    def end(self) -> None:
        self.host.call("session-end", {**self.base, "hook_event_name": "SessionEnd"})


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("replay")
    home = root / "data"
    home.mkdir()
    api = _git_project(root / "api", "git@github.com:acme/api.git")
    web = _git_project(root / "web", "https://github.com/acme/web.git")
    host = Host(home)
    transcripts = root / "transcripts"

    first = Session(host, "api-1", api, transcripts)
    opened_empty = first.start()
    first.prompt("We decided to store timestamps as ISO 8601 UTC strings in the API.")
    first.prompt("From now on run the test suite with pytest -n 2 before committing.")
    first.failed_tool(
        "Bash",
        {"command": "pytest -q tests/test_dates.py"},
        "Exit code 1\nE   psycopg.OperationalError: connection to "
        "postgres://admin:Sup3rS3cret!@db.internal:5432/app failed\n"
        "FAILED tests/test_dates.py::test_round_trip",
    )
    first.tool("Read", {"file_path": str(api / "src/dates.py")}, {"content": "..."})
    first.tool("Edit", {"file_path": str(api / "src/dates.py")}, {"filePath": "src/dates.py"})
    first.tool(
        "Bash",
        {"command": "pytest -q tests/test_dates.py"},
        {"stdout": "3 passed", "stderr": "", "interrupted": False},
    )
    first.prompt("ok")
    # The agent saves a note through the MCP server, as prime_memory_store does.
    with MemoryEngine(home / "memory.db", scope="project:github.com/acme/api") as engine:
        engine.store(
            "The dates module converts naive datetimes to UTC before formatting; "
            "clients parse the strings with Date.parse.",
            session="api-1",
        )
    first.stop(
        "Fixed: dates are serialised with isoformat() in src/dates.py, and the test "
        "database now reads its password from the environment. I also removed the token "
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789 that was pasted into config.toml.",
        in_payload=False,
    )
    first.end()

    other = Session(host, "web-1", web, transcripts)
    other.start()
    other.prompt(
        "We decided to deploy the web app with Helm charts on the staging cluster. "
        "<private>The staging password is hunter2-staging.</private>"
    )
    other.prompt("Add these to .env: STRIPE_SECRET_KEY=sk_live_51HxQmPLbV0wKc7yZ9aBcDeFgHiJ")
    other.stop(
        "The Helm chart is in deploy/chart; AWS access uses AKIAIOSFODNN7EXAMPLE "
        "from the CI secrets store.",
        in_payload=True,
    )
    other.end()

    second = Session(host, "api-2", api, transcripts)
    opened = second.start()
    follow_up = second.prompt("How do clients parse the timestamps the dates module sends?")
    unrelated = second.prompt("Write a haiku about autumn leaves falling in the park")
    second.end()
    return {
        "home": home,
        "opened_empty": opened_empty,
        "opened": opened,
        "follow_up": follow_up,
        "unrelated": unrelated,
    }


def test_a_first_session_opens_with_one_short_line(replay: dict[str, Any]) -> None:
    assert len(replay["opened_empty"].splitlines()) == 1


def test_a_new_session_opens_with_its_project_s_decisions_only(replay: dict[str, Any]) -> None:
    opened = replay["opened"]
    assert "ISO 8601 UTC" in opened
    assert "pytest -n 2" in opened
    assert "Helm" not in opened and "staging" not in opened


def test_a_new_session_opens_with_what_the_last_one_left(replay: dict[str, Any]) -> None:
    assert "Last session here" in replay["opened"]
    assert "isoformat()" in replay["opened"]


def test_a_follow_up_prompt_gets_the_note_it_bears_on(replay: dict[str, Any]) -> None:
    assert "Date.parse" in replay["follow_up"]
    assert "ISO 8601 UTC" not in replay["follow_up"]  # the opening showed it already


def test_an_unrelated_prompt_gets_nothing(replay: dict[str, Any]) -> None:
    assert replay["unrelated"] == ""


def test_the_failure_and_its_fix_are_kept_with_the_file(replay: dict[str, Any]) -> None:
    with MemoryEngine(replay["home"] / "memory.db") as engine:
        pitfalls = engine.query(domain="pitfall", scopes=["*"])
        trivial = engine.query("ok", scopes=["*"])
    assert len(pitfalls) == 1
    assert "test_round_trip" in pitfalls[0].record.content
    assert "edited src/dates.py" in pitfalls[0].record.content
    assert pitfalls[0].record.tags == ("file:src/dates.py",)
    assert pitfalls[0].record.session == "api-1"
    assert all(hit.record.content.strip() != "ok" for hit in trivial)


def test_every_memory_is_in_its_own_project_s_scope(replay: dict[str, Any]) -> None:
    with MemoryEngine(replay["home"] / "memory.db") as engine:
        hits = engine.query(scopes=["*"], limit=100)
    scopes = {hit.record.session: hit.record.scope for hit in hits}
    assert scopes == {
        "api-1": "project:github.com/acme/api",
        "web-1": "project:github.com/acme/web",
        "api-2": "project:github.com/acme/api",
    }


def test_no_secret_reaches_the_store_the_spool_or_the_log(replay: dict[str, Any]) -> None:
    files = [path for path in replay["home"].rglob("*") if path.is_file()]
    assert any(path.name == "hooks.log" for path in files) or files
    assert any(path.name == "memory.db" for path in files)
    for path in files:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} in {path.name}"


def test_hooks_of_many_sessions_at_once_lose_nothing(tmp_path: Path) -> None:
    home = tmp_path / "data"
    home.mkdir()
    project = _git_project(tmp_path / "api", "git@github.com:acme/api.git")
    host = Host(home)
    names = [f"parallel-{n}" for n in range(6)]

    def all_at_once(event: str, payloads: list[dict[str, Any]]) -> None:
        running = [
            subprocess.Popen(
                [*HOOK, event, "--host", "claude-code"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=host.env,
            )
            for _ in payloads
        ]
        for process, payload in zip(running, payloads, strict=True):
            _, err = process.communicate(json.dumps(payload).encode(), timeout=60)
            assert (process.returncode, err) == (0, b"")

    base = [{"session_id": name, "cwd": str(project)} for name in names]
    all_at_once(
        "prompt",
        [
            {**b, "prompt": f"We decided that service {n} retries three times."}
            for n, b in enumerate(base)
        ],
    )
    all_at_once(
        "tool",
        [
            {**b, "tool_name": "Edit", "tool_input": {"file_path": str(project / f"s{n}.py")}}
            for n, b in enumerate(base)
        ],
    )
    all_at_once(
        "stop",
        [
            {**b, "last_assistant_message": f"Service {n} now retries three times with backoff."}
            for n, b in enumerate(base)
        ],
    )
    with MemoryEngine(home / "memory.db") as engine:
        hits = engine.query(scopes=["*"], limit=100)
    kept = sorted((h.record.session, h.record.domain, h.record.tags) for h in hits)
    assert kept == sorted(
        item
        for n, name in enumerate(names)
        for item in ((name, "decision", ()), (name, "session", (f"file:s{n}.py",)))
    )
    assert not any(
        path.name.endswith(".db") and path.parent.name == "hooks" and _pending(path)
        for path in home.rglob("*.db")
    )


def _pending(path: Path) -> int:
    from prime_memory_folding.capture.spool import Spool

    with Spool(path) as spool:
        return spool.pending()
