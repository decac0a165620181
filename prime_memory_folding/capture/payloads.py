"""What a host hands a hook on standard input, and what the hook answers on standard output.

A hook process imports this module, so it uses the standard library only.

:func:`parse` reads each host's JSON into one :class:`HookInput`, whatever
the host calls its fields; :func:`render` gives the text that adds context to
the agent in the form the host documents (see docs/hooks.md, "Hosts").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .hosts import EVENTS, HOSTS

__all__ = ["BadPayload", "HookInput", "parse", "render"]


class BadPayload(ValueError):
    """A hook's input is not what its host sends: not a JSON object, or a field of a wrong type."""


@dataclass(frozen=True)
class HookInput:
    """One hook call, in host-neutral terms.

    A field the host did not send is None. When a tool failed,
    ``tool_response`` is a dict whose ``"error"`` holds the host's error text
    (Claude Code's PostToolUseFailure, Cursor's postToolUseFailure).

    Attributes:
        host: the host's name (:data:`~prime_memory_folding.capture.hosts.HOSTS`).
        event: ours (:data:`~prime_memory_folding.capture.hosts.EVENTS`).
        session_id: the host's session (Cursor: its conversation).
        cwd: the working folder (Cursor: the first workspace root, if no cwd).
        transcript_path: the host's transcript file.
        prompt: the user's prompt.
        tool_name: the tool that ran, as the host names it.
        tool_input: the tool's arguments, as the host gives them.
        tool_response: the tool's result, as the host gives it.
        last_message: the agent's final answer for the turn.
        raw: the whole object the host sent.
    """

    host: str
    event: str
    session_id: str | None
    cwd: str | None
    transcript_path: str | None
    prompt: str | None
    tool_name: str | None
    tool_input: Any
    tool_response: Any
    last_message: str | None
    raw: dict[str, Any]


def _text(data: dict[str, Any], *names: str) -> str | None:
    """The first of ``names`` present and not null, which must be a string."""
    for name in names:
        value = data.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise BadPayload(f"field {name!r} must be a string, not {type(value).__name__}")
        return value
    return None


def _cursor_cwd(data: dict[str, Any]) -> str | None:
    cwd = _text(data, "cwd")
    if cwd is not None:
        return cwd
    roots = data.get("workspace_roots")
    if roots is None:
        return None
    if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
        raise BadPayload("field 'workspace_roots' must be a list of strings")
    return roots[0] if roots else None


def _failure(data: dict[str, Any], error_field: str, *extra: str) -> Any:
    """A failed tool's error text as a response, or None when the tool did not fail."""
    error = _text(data, error_field)
    if error is None:
        return None
    failure: dict[str, Any] = {"error": error}
    for name in extra:
        if name in data:
            failure[name] = data[name]
    return failure


def _load(data: str | bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, TypeError) as exc:  # JSONDecodeError and bad UTF-8 are ValueErrors
        message = " ".join(str(exc).split())
        raise BadPayload(f"hook input is not JSON: {message}") from None
    if not isinstance(value, dict):
        raise BadPayload(f"hook input must be a JSON object, not {type(value).__name__}")
    return value


def parse(host: str, event: str, data: str | bytes) -> HookInput:
    """Read what ``host`` sent a hook for our ``event``.

    Missing fields become None; each host's field names map to ours.

    Raises:
        BadPayload: the host or event is unknown, the input is not a JSON
            object, or a field has the wrong type.
    """
    if host not in HOSTS:
        raise BadPayload(f"unknown host {host!r}; hosts: {', '.join(HOSTS)}")
    if event not in EVENTS:
        raise BadPayload(f"unknown event {event!r}; events: {', '.join(EVENTS)}")
    raw = _load(data)
    if host == "cursor":
        session_id = _text(raw, "conversation_id", "session_id")
        cwd = _cursor_cwd(raw)
        response = raw["tool_output"] if raw.get("tool_output") is not None else None
        if response is None:
            response = _failure(raw, "error_message", "failure_type", "is_interrupt")
        last = _text(raw, "text") if event == "stop" else None
    else:
        # VS Code sends camelCase sessionId, and reads Claude Code's settings too.
        names = ("sessionId", "session_id") if host == "vscode" else ("session_id", "sessionId")
        session_id = _text(raw, *names)
        cwd = _text(raw, "cwd")
        response = raw.get("tool_response")
        if response is None and host == "claude-code":
            response = _failure(raw, "error", "is_interrupt")
        last = _text(raw, "prompt_response" if host == "gemini" else "last_assistant_message")
    return HookInput(
        host=host,
        event=event,
        session_id=session_id,
        cwd=cwd,
        transcript_path=_text(raw, "transcript_path"),
        prompt=_text(raw, "prompt"),
        tool_name=_text(raw, "tool_name"),
        tool_input=raw.get("tool_input"),
        tool_response=response,
        last_message=last,
        raw=raw,
    )


#: Per host, our events whose hook can add context, and the host event the answer names.
_CONTEXT: dict[str, dict[str, str]] = {
    "claude-code": {"session-start": "SessionStart", "prompt": "UserPromptSubmit"},
    "codex": {"session-start": "SessionStart", "prompt": "UserPromptSubmit"},
    "gemini": {"session-start": "SessionStart", "prompt": "BeforeAgent"},
    # VS Code documents additionalContext on SessionStart only; UserPromptSubmit
    # takes the common output, which carries no context.
    "vscode": {"session-start": "SessionStart"},
    # Cursor documents additional_context on sessionStart only.
    "cursor": {"session-start": "sessionStart"},
}


def render(host: str, event: str, text: str) -> str:
    """What a hook prints so that ``host`` adds ``text`` to the agent's context.

    Returns "" when ``text`` is empty, for capture events, and where the host
    takes no context on that event; printing nothing lets every host go on.

    Raises:
        BadPayload: the host or event is unknown.
    """
    if host not in HOSTS:
        raise BadPayload(f"unknown host {host!r}; hosts: {', '.join(HOSTS)}")
    if event not in EVENTS:
        raise BadPayload(f"unknown event {event!r}; events: {', '.join(EVENTS)}")
    host_event = _CONTEXT[host].get(event)
    if not text or host_event is None:
        return ""
    if host == "cursor":
        return json.dumps({"additional_context": text})
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": host_event, "additionalContext": text}}
    )
