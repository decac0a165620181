"""Each host's hook input read into one shape, and context answered in each host's form."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding.capture.hosts import EVENTS, HOSTS
from prime_memory_folding.capture.payloads import BadPayload, HookInput, parse, render

TRANSCRIPT = "/Users/me/.claude/projects/x/00893aaf.jsonl"

#: (host, our event, the input the host's documentation shows, the fields we read from it)
DOCUMENTED: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "claude-code",
        "session-start",
        {
            "session_id": "abc123",
            "transcript_path": TRANSCRIPT,
            "cwd": "/Users/me/api",
            "hook_event_name": "SessionStart",
            "source": "startup",
            "model": "claude-sonnet-5",
        },
        {"session_id": "abc123", "cwd": "/Users/me/api", "transcript_path": TRANSCRIPT},
    ),
    (
        "claude-code",
        "prompt",
        {
            "session_id": "abc123",
            "transcript_path": TRANSCRIPT,
            "cwd": "/Users/me/api",
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": "Write a function to calculate the factorial of a number",
        },
        {"prompt": "Write a function to calculate the factorial of a number"},
    ),
    (
        "claude-code",
        "tool",
        {
            "session_id": "abc123",
            "transcript_path": TRANSCRIPT,
            "cwd": "/Users/me/api",
            "hook_event_name": "PostToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": "/path/to/file.txt", "content": "file content"},
            "tool_response": {"filePath": "/path/to/file.txt", "success": True},
            "tool_use_id": "toolu_01ABC123",
        },
        {
            "tool_name": "Write",
            "tool_input": {"file_path": "/path/to/file.txt", "content": "file content"},
            "tool_response": {"filePath": "/path/to/file.txt", "success": True},
        },
    ),
    (
        "claude-code",
        "tool",
        {
            "session_id": "abc123",
            "cwd": "/Users/me/api",
            "hook_event_name": "PostToolUseFailure",
            "tool_name": "Bash",
            "tool_input": {"command": "npm test", "description": "Run test suite"},
            "tool_use_id": "toolu_01ABC123",
            "error": "Exit code 1\nError: Cannot find module 'express'",
            "is_interrupt": False,
        },
        {
            "tool_name": "Bash",
            "tool_input": {"command": "npm test", "description": "Run test suite"},
            "tool_response": {
                "error": "Exit code 1\nError: Cannot find module 'express'",
                "is_interrupt": False,
            },
        },
    ),
    (
        "claude-code",
        "stop",
        {
            "session_id": "abc123",
            "transcript_path": TRANSCRIPT,
            "cwd": "/Users/me/api",
            "hook_event_name": "Stop",
            "stop_hook_active": True,
            "last_assistant_message": "I've completed the refactoring.",
            "background_tasks": [],
            "session_crons": [],
        },
        {"last_message": "I've completed the refactoring.", "prompt": None},
    ),
    (
        "claude-code",
        "session-end",
        {"session_id": "abc123", "cwd": "/Users/me", "hook_event_name": "SessionEnd"},
        {"session_id": "abc123", "transcript_path": None, "last_message": None},
    ),
    (
        "codex",
        "tool",
        {
            "session_id": "s-1",
            "transcript_path": None,
            "cwd": "/repo",
            "hook_event_name": "PostToolUse",
            "model": "gpt-5",
            "permission_mode": "default",
            "turn_id": "t-1",
            "tool_name": "Bash",
            "tool_use_id": "c-1",
            "tool_input": {"command": "pytest -q"},
            "tool_response": "1 failed",
        },
        {"session_id": "s-1", "transcript_path": None, "tool_response": "1 failed"},
    ),
    (
        "codex",
        "stop",
        {
            "session_id": "s-1",
            "cwd": "/repo",
            "hook_event_name": "Stop",
            "turn_id": "t-1",
            "stop_hook_active": False,
            "last_assistant_message": None,
        },
        {"last_message": None, "cwd": "/repo"},
    ),
    (
        "cursor",
        "session-start",
        {
            "conversation_id": "conv-1",
            "generation_id": "gen-1",
            "model": "m",
            "hook_event_name": "sessionStart",
            "cursor_version": "1.7",
            "workspace_roots": ["/work/api", "/work/web"],
            "user_email": None,
            "transcript_path": None,
            "session_id": "conv-1",
            "is_background_agent": False,
            "composer_mode": "agent",
        },
        {"session_id": "conv-1", "cwd": "/work/api", "transcript_path": None},
    ),
    (
        "cursor",
        "prompt",
        {
            "conversation_id": "conv-1",
            "hook_event_name": "beforeSubmitPrompt",
            "workspace_roots": ["/work/api"],
            "prompt": "fix the login",
            "attachments": [{"type": "file", "filePath": "/work/api/login.ts"}],
        },
        {"prompt": "fix the login", "cwd": "/work/api"},
    ),
    (
        "cursor",
        "tool",
        {
            "conversation_id": "conv-1",
            "hook_event_name": "postToolUse",
            "workspace_roots": ["/work/api"],
            "tool_name": "Shell",
            "tool_input": {"command": "npm test"},
            "tool_output": "All tests passed",
            "tool_use_id": "abc123",
            "cwd": "/project",
            "duration": 5432,
        },
        {"cwd": "/project", "tool_name": "Shell", "tool_response": "All tests passed"},
    ),
    (
        "cursor",
        "tool",
        {
            "conversation_id": "conv-1",
            "hook_event_name": "postToolUseFailure",
            "tool_name": "Shell",
            "tool_input": {"command": "npm test"},
            "tool_use_id": "abc123",
            "cwd": "/project",
            "error_message": "Command timed out after 30s",
            "failure_type": "timeout",
            "duration": 5000,
            "is_interrupt": False,
        },
        {
            "tool_response": {
                "error": "Command timed out after 30s",
                "failure_type": "timeout",
                "is_interrupt": False,
            }
        },
    ),
    (
        "cursor",
        "stop",
        {"conversation_id": "conv-1", "hook_event_name": "afterAgentResponse", "text": "Done."},
        {"last_message": "Done.", "cwd": None},
    ),
    (
        "gemini",
        "prompt",
        {
            "session_id": "g-1",
            "transcript_path": "/home/me/.gemini/tmp/chat.json",
            "cwd": "/repo",
            "hook_event_name": "BeforeAgent",
            "timestamp": "2026-12-01T10:00:00Z",
            "prompt": "add a test",
        },
        {"session_id": "g-1", "prompt": "add a test"},
    ),
    (
        "gemini",
        "tool",
        {
            "session_id": "g-1",
            "cwd": "/repo",
            "hook_event_name": "AfterTool",
            "tool_name": "run_shell_command",
            "tool_input": {"command": "make"},
            "tool_response": {"llmContent": "ok", "returnDisplay": "ok"},
        },
        {
            "tool_name": "run_shell_command",
            "tool_response": {"llmContent": "ok", "returnDisplay": "ok"},
        },
    ),
    (
        "gemini",
        "stop",
        {
            "session_id": "g-1",
            "cwd": "/repo",
            "hook_event_name": "AfterAgent",
            "prompt": "add a test",
            "prompt_response": "Added tests/test_x.py.",
            "stop_hook_active": False,
        },
        {"last_message": "Added tests/test_x.py.", "prompt": "add a test"},
    ),
    (
        "vscode",
        "session-start",
        {
            "timestamp": "2026-02-09T10:30:00.000Z",
            "cwd": "/path/to/workspace",
            "sessionId": "session-identifier",
            "hookEventName": "SessionStart",
            "transcript_path": "/path/to/transcript.json",
            "source": "new",
        },
        {
            "session_id": "session-identifier",
            "cwd": "/path/to/workspace",
            "transcript_path": "/path/to/transcript.json",
        },
    ),
    (
        "vscode",
        "tool",
        {
            "sessionId": "session-identifier",
            "hookEventName": "PostToolUse",
            "tool_name": "editFiles",
            "tool_input": {"files": ["src/main.ts"]},
            "tool_use_id": "tool-123",
            "tool_response": "File edited successfully",
        },
        {"tool_name": "editFiles", "tool_response": "File edited successfully"},
    ),
]


@pytest.mark.parametrize(
    ("host", "event", "payload", "expected"),
    DOCUMENTED,
    ids=[
        f"{h}-{e}-{p.get('hook_event_name') or p.get('hookEventName')}" for h, e, p, _ in DOCUMENTED
    ],
)
def test_a_documented_payload_maps_to_our_fields(
    host: str, event: str, payload: dict[str, Any], expected: dict[str, Any]
) -> None:
    for data in (json.dumps(payload), json.dumps(payload).encode()):
        got = parse(host, event, data)
        assert isinstance(got, HookInput)
        assert (got.host, got.event, got.raw) == (host, event, payload)
        for field, value in expected.items():
            assert getattr(got, field) == value, field


def test_every_host_has_a_documented_payload_here() -> None:
    assert {host for host, *_ in DOCUMENTED} == set(HOSTS)


def test_claude_code_reads_the_camel_case_session_id_vs_code_sends() -> None:
    got = parse("claude-code", "prompt", '{"sessionId": "v-1", "prompt": "hi"}')
    assert got.session_id == "v-1"


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_missing_fields_are_none(host: str) -> None:
    got = parse(host, "tool", "{}")
    assert got.raw == {}
    assert all(
        getattr(got, name) is None
        for name in (
            "session_id",
            "cwd",
            "transcript_path",
            "prompt",
            "tool_name",
            "tool_input",
            "tool_response",
            "last_message",
        )
    )


GARBAGE = {
    "not JSON": (b"{nope", "not JSON"),
    "empty": (b"", "not JSON"),
    "not UTF-8": (b'{"a": "\xff"}', "not JSON"),
    "an array": (b"[]", "JSON object"),
    "a string": (b'"hi"', "JSON object"),
    "a number id": (b'{"session_id": 7}', "'session_id'"),
    "a list prompt": (b'{"prompt": ["a"]}', "'prompt'"),
    "an object cwd": (b'{"cwd": {}, "workspace_roots": []}', "'cwd'"),
}


@pytest.mark.parametrize("case", sorted(GARBAGE))
@pytest.mark.parametrize("host", sorted(HOSTS))
def test_garbage_raises_bad_payload_in_one_line(host: str, case: str) -> None:
    data, fragment = GARBAGE[case]
    with pytest.raises(BadPayload) as caught:
        parse(host, "prompt", data)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_cursor_workspace_roots_must_be_strings() -> None:
    with pytest.raises(BadPayload, match="workspace_roots"):
        parse("cursor", "prompt", '{"workspace_roots": [1]}')
    assert parse("cursor", "prompt", '{"workspace_roots": []}').cwd is None


def test_an_unknown_host_or_event_is_a_bad_payload() -> None:
    with pytest.raises(BadPayload, match="unknown host 'windsurf'"):
        parse("windsurf", "prompt", "{}")
    with pytest.raises(BadPayload, match="unknown event 'PostToolUse'"):
        parse("claude-code", "PostToolUse", "{}")
    with pytest.raises(BadPayload, match="unknown host"):
        render("windsurf", "prompt", "x")


@given(st.binary(max_size=64))
def test_parse_either_reads_an_object_or_raises_bad_payload(data: bytes) -> None:
    try:
        got = parse("claude-code", "tool", data)
    except BadPayload:
        return
    assert isinstance(got.raw, dict)


CONTEXT_FORMS: dict[tuple[str, str], dict[str, Any]] = {
    ("claude-code", "session-start"): {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "T"}
    },
    ("claude-code", "prompt"): {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "T"}
    },
    ("codex", "session-start"): {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "T"}
    },
    ("codex", "prompt"): {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "T"}
    },
    ("gemini", "session-start"): {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "T"}
    },
    ("gemini", "prompt"): {
        "hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "T"}
    },
    ("vscode", "session-start"): {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "T"}
    },
    ("cursor", "session-start"): {"additional_context": "T"},
}


@pytest.mark.parametrize("event", EVENTS)
@pytest.mark.parametrize("host", sorted(HOSTS))
def test_render_gives_each_hosts_context_form_or_nothing(host: str, event: str) -> None:
    out = render(host, event, "T")
    form = CONTEXT_FORMS.get((host, event))
    if form is None:
        assert out == ""
    else:
        assert json.loads(out) == form
    assert render(host, event, "") == ""


def test_rendered_context_keeps_any_text_whole() -> None:
    text = 'line one\n"quoted" ünïcode </private> {braces}'
    for (host, event), _ in CONTEXT_FORMS.items():
        doc = json.loads(render(host, event, text))
        inner = doc.get("hookSpecificOutput", doc)
        assert text in inner.values()
