"""What hooks keep of a session: the rules, the spool, the drain and the transcript."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding import MemoryEngine
from prime_memory_folding.capture.drain import drain
from prime_memory_folding.capture.keep import (
    memories,
    rule_kind,
    tool_capture,
    worth_keeping,
)
from prime_memory_folding.capture.spool import ABANDONED_S, END, STALE_CLAIM_S, Captured, Spool
from prime_memory_folding.capture.transcript import last_answer

SCOPE = "project:github.com/acme/api"


@pytest.mark.parametrize(
    "prompt", ["ok", "continue", "yes", "Yes please!", "go ahead", "thanks", "/clear", "lgtm", " "]
)
def test_trivial_prompts_are_not_kept(prompt: str) -> None:
    assert not worth_keeping("prompt", prompt)


@pytest.mark.parametrize(
    "prompt",
    ["Fix the flaky login test in auth.py", "why does the migration fail on PostgreSQL?"],
)
def test_prompts_that_ask_something_are_kept(prompt: str) -> None:
    assert worth_keeping("prompt", prompt)


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("We decided to store timestamps as ISO 8601 UTC strings.", "decision"),
        ("ok so we'll use Helm charts for deploys", "decision"),
        ("From now on run the tests with -n 2.", "convention"),
        ("Thanks. Never commit generated files.", "convention"),
        ("Why is the build always red on Fridays?", None),
        ("fix the parser", None),
    ],
)
def test_a_prompt_that_states_a_rule_is_kept_as_one(prompt: str, kind: str | None) -> None:
    assert rule_kind(prompt) == kind


@pytest.mark.parametrize(
    ("tool", "tool_input", "response"),
    [
        ("Read", {"file_path": "/p/a.py"}, {"content": "x"}),
        ("Grep", {"pattern": "foo"}, "a.py:1:foo"),
        ("Glob", {"pattern": "*.py"}, ["a.py"]),
        ("TodoWrite", {"todos": []}, {}),
        ("Edit", {"file_path": "/p/a.py"}, {"error": "String not found"}),
    ],
)
def test_tool_chatter_is_dropped(tool: str, tool_input: Any, response: Any) -> None:
    found = tool_capture(tool, tool_input, response, "/p")
    assert found is None or found.get("failed") is True


def test_an_edit_is_kept_as_its_file_relative_to_the_project() -> None:
    found = tool_capture("Edit", {"file_path": "/p/src/a.py", "old_string": "x"}, {}, "/p")
    assert found == {"edited": ["src/a.py"]}


def test_a_patch_keeps_every_file_it_touches() -> None:
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n*** Add File: b/c.py\n*** End Patch"
    assert tool_capture("apply_patch", {"input": patch}, {}, None) == {"edited": ["a.py", "b/c.py"]}


@pytest.mark.parametrize(
    ("response", "failed"),
    [
        ({"stdout": "ok", "stderr": "", "interrupted": False}, False),
        ({"exit_code": 1, "stderr": "E   AssertionError"}, True),
        ({"error": "Exit code 2\nsyntax error"}, True),
        ("Error: command not found", True),
    ],
)
def test_a_shell_command_is_kept_with_whether_it_failed(response: Any, failed: bool) -> None:
    found = tool_capture("Bash", {"command": "pytest -q"}, response, "/p")
    assert found is not None
    assert found["command"] == "pytest -q" and found["failed"] is failed
    assert ("error" in found) is failed


def test_an_error_keeps_only_its_tail() -> None:
    error = "\n".join(f"line {i}" for i in range(100))
    found = tool_capture("Bash", {"command": "make"}, {"exit_code": 2, "stderr": error}, None)
    assert found is not None
    assert found["error"].splitlines() == [f"line {i}" for i in range(85, 100)]


def _captured(kind: str, body: dict[str, Any], n: int, session: str = "s1") -> Captured:
    return Captured(n, session, SCOPE, "claude-code", kind, body, 1000.0 + n)


def test_a_failure_is_paired_with_the_fix_that_followed() -> None:
    captures = [
        _captured("prompt", {"prompt": "make the tests pass again"}, 1),
        _captured("tool", {"command": "pytest -q", "failed": True, "error": "E assert 1 == 2"}, 2),
        _captured("tool", {"edited": ["src/calc.py"]}, 3),
        _captured("tool", {"command": "pytest -q", "failed": False}, 4),
        _captured("answer", {"text": "Fixed the off-by-one in calc.add; the suite passes now."}, 5),
    ]
    found = memories(captures)
    pitfall = next(item for item in found if item["domain"] == "pitfall")
    assert "E assert 1 == 2" in pitfall["content"]
    assert "edited src/calc.py" in pitfall["content"]
    assert pitfall["tags"] == ["file:src/calc.py"]
    answer = next(item for item in found if item["subdomain"] == "answer")
    assert answer["tags"] == ["file:src/calc.py"]
    assert [item["session"] for item in found] == ["s1"] * 3
    assert all(item["scope"] == SCOPE for item in found)


def test_a_failure_never_fixed_is_kept_as_unfinished() -> None:
    found = memories(
        [_captured("tool", {"command": "make deploy", "failed": True, "error": "denied"}, 1)]
    )
    assert [(item["domain"], item["subdomain"]) for item in found] == [("session", "failure")]


def test_sessions_do_not_lend_each_other_fixes() -> None:
    captures = [
        _captured("tool", {"command": "pytest", "failed": True, "error": "boom"}, 1, "a"),
        _captured("tool", {"edited": ["x.py"]}, 2, "b"),
        _captured("tool", {"command": "pytest", "failed": False}, 3, "b"),
    ]
    assert [item["domain"] for item in memories(captures)] == ["session"]


# -- the spool -------------------------------------------------------------------


def _spool(tmp_path: Path) -> Spool:
    return Spool(tmp_path / "hooks" / "spool.db")


def test_many_writers_at_once_lose_nothing(tmp_path: Path) -> None:
    _spool(tmp_path).close()
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            with _spool(tmp_path) as spool:
                for n in range(40):
                    spool.append(
                        session=f"s{writer}",
                        scope=SCOPE,
                        host="claude-code",
                        kind="prompt",
                        body={"prompt": f"{writer}-{n}"},
                        at=float(n),
                    )
        except BaseException as exc:  # pragma: no cover - the assertion shows it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with _spool(tmp_path) as spool:
        claimed = spool.claim(ABANDONED_S + 100.0)  # no turn ended: all abandoned by then
    assert sorted(c.body["prompt"] for c in claimed) == sorted(
        f"{w}-{n}" for w in range(8) for n in range(40)
    )


def test_a_claim_is_taken_once_and_a_stale_one_again(tmp_path: Path) -> None:
    with _spool(tmp_path) as spool:
        spool.append(session="s", scope=SCOPE, host="h", kind="prompt", body={"p": 1}, at=1.0)
        spool.append(session="s", scope=SCOPE, host="h", kind=END, body={}, at=2.0)
        first = spool.claim(10.0)
        assert [c.kind for c in first] == ["prompt", END]
        assert spool.claim(11.0) == []
        again = spool.claim(10.0 + STALE_CLAIM_S + 1)
        assert [c.id for c in again] == [c.id for c in first]
        spool.done([c.id for c in first])
        assert spool.pending() == 0


def test_a_turn_still_going_on_waits_for_its_end(tmp_path: Path) -> None:
    with _spool(tmp_path) as spool:
        for session in ("ended", "going"):
            spool.append(session=session, scope=SCOPE, host="h", kind="tool", body={"e": 1}, at=1.0)
        spool.append(session="ended", scope=SCOPE, host="h", kind=END, body={}, at=2.0)
        spool.append(session="ended", scope=SCOPE, host="h", kind="prompt", body={}, at=3.0)
        ended = spool.claim(10.0)
        assert [(c.session, c.kind) for c in ended] == [("ended", "tool"), ("ended", END)]
        spool.done([c.id for c in ended])
        late = spool.claim(3.0 + ABANDONED_S + 1)
        assert sorted((c.session, c.kind) for c in late) == [
            ("ended", "prompt"),
            ("going", "tool"),
        ]


def test_a_session_remembers_what_it_was_shown(tmp_path: Path) -> None:
    with _spool(tmp_path) as spool:
        spool.inject("s1", ["a", "b"], 10.0)
        spool.inject("s1", ["b", "c"], 11.0)
        assert spool.injected("s1") == {"a", "b", "c"}
        assert spool.injected("s2") == set()


def test_the_last_session_is_the_one_active_last_in_its_scope(tmp_path: Path) -> None:
    with _spool(tmp_path) as spool:
        spool.active("old", SCOPE, "h", 1.0)
        spool.active("other-project", "project:x", "h", 5.0)
        spool.active("new", SCOPE, "h", 3.0)
        assert spool.last_session(SCOPE) == "new"
        assert spool.last_session(SCOPE, other_than="new") == "old"
        assert spool.last_session("project:none") is None


# -- the drain -------------------------------------------------------------------


def _append_turn(spool: Spool, session: str = "s1") -> None:
    spool.append(
        session=session,
        scope=SCOPE,
        host="claude-code",
        kind="prompt",
        body={"prompt": "We decided to keep sessions in Redis."},
        at=1.0,
    )
    spool.append(
        session=session,
        scope=SCOPE,
        host="claude-code",
        kind="answer",
        body={"text": "Sessions now live in Redis with a one-hour expiry on each key."},
        at=2.0,
    )
    spool.append(session=session, scope=SCOPE, host="claude-code", kind=END, body={}, at=3.0)


def test_a_drain_stores_the_captures_and_empties_the_spool(tmp_path: Path) -> None:
    store = str(tmp_path / "memory.db")
    with _spool(tmp_path) as spool:
        _append_turn(spool)
        done = drain(spool, store=store)
        assert (done.captures, done.stored, done.already) == (3, 2, 0)
        assert spool.pending() == 0
    with MemoryEngine(store) as engine:
        hits = engine.query(scopes=[SCOPE])
        assert {(h.record.domain, h.record.session) for h in hits} == {
            ("decision", "s1"),
            ("session", "s1"),
        }


def test_a_drain_leaves_out_what_is_already_stored(tmp_path: Path) -> None:
    store = str(tmp_path / "memory.db")
    with MemoryEngine(store) as engine:
        engine.store("We decided to keep sessions in Redis.", domain="decision", scope=SCOPE)
    with _spool(tmp_path) as spool:
        _append_turn(spool)
        done = drain(spool, store=store)
    assert (done.stored, done.already) == (1, 1)


class _Failing:
    def store_many(self, items: Any) -> Any:
        raise OSError("disk full")

    def close(self) -> None:
        pass


def test_a_drain_that_cannot_store_gives_every_capture_back(tmp_path: Path) -> None:
    with _spool(tmp_path) as spool:
        _append_turn(spool)
        with pytest.raises(OSError, match="disk full"):
            drain(spool, store=str(tmp_path / "memory.db"), open_engine=lambda _: _Failing())
        assert [c.kind for c in spool.claim(5.0)] == ["prompt", "answer", END]


# -- the transcript ---------------------------------------------------------------


def _line(kind: str, content: Any) -> str:
    return json.dumps({"type": kind, "message": {"role": kind, "content": content}})


def test_the_last_answer_is_the_last_assistant_text(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(
        "\n".join(
            [
                _line("user", "fix it"),
                _line("assistant", [{"type": "text", "text": "First answer."}]),
                _line("assistant", [{"type": "tool_use", "name": "Bash", "input": {}}]),
                "not json at all",
                _line("assistant", [{"type": "text", "text": "Done: the fix is in."}]),
                _line("user", [{"type": "tool_result", "content": "ok"}]),
            ]
        )
    )
    assert last_answer(transcript) == "Done: the fix is in."
    assert last_answer(tmp_path / "missing.jsonl") is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["prompt", "answer", "edit", "fail", "pass"]), max_size=12))
def test_every_memory_keeps_its_capture_s_session_and_scope(kinds: list[str]) -> None:
    bodies = {
        "prompt": ("prompt", {"prompt": "Refactor the billing module today"}),
        "answer": ("answer", {"text": "The billing module is split into three services now."}),
        "edit": ("tool", {"edited": ["billing.py"]}),
        "fail": ("tool", {"command": "make", "failed": True, "error": "boom"}),
        "pass": ("tool", {"command": "make", "failed": False}),
    }
    captures = [
        Captured(n, f"s{n % 2}", SCOPE, "codex", bodies[k][0], bodies[k][1], float(n))
        for n, k in enumerate(kinds)
    ]
    found = memories(captures)
    sessions = {c.session for c in captures}
    assert all(item["session"] in sessions and item["scope"] == SCOPE for item in found)
    assert len(found) <= len(captures)
