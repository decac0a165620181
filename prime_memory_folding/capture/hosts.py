"""The hosts whose command hooks prime-memory installs, and what each one calls.

A hook process imports this module, so it uses the standard library only.

Each host names its events in its own way; prime-memory speaks of six
(:data:`EVENTS`). A :class:`Binding` ties one of ours to one of the host's,
with the matcher, timeout and background flag that host documents, and a
host's entries all run :func:`hook_command`, which names the host and the
event, so an entry can always be told for ours (:func:`is_ours`).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CAPTURE_TIMEOUT",
    "CONTEXT_TIMEOUT",
    "EVENTS",
    "HOSTS",
    "Binding",
    "Host",
    "hook_command",
    "is_ours",
]

#: The host-neutral events, in the order a session meets them.
EVENTS: tuple[str, ...] = ("session-start", "prompt", "tool", "stop", "compact", "session-end")

#: Seconds a hook that adds context may take (it answers in well under two).
CONTEXT_TIMEOUT = 10
#: Seconds a hook that only captures may take.
CAPTURE_TIMEOUT = 30

#: The names our executable goes by, whichever folder it is in.
EXECUTABLE_NAMES = ("prime-memory", "prime-memory.exe")


@dataclass(frozen=True)
class Binding:
    """One of our events as one host event.

    Attributes:
        event: ours, one of :data:`EVENTS`.
        host_event: the host's name for it, as its settings file spells it.
        matcher: the host's matcher for the entry, or None for none.
        timeout: in the host's unit (:attr:`Host.timeout_unit`).
        background: run without blocking the agent (Claude Code's ``async``).
    """

    event: str
    host_event: str
    matcher: str | None
    timeout: int
    background: bool = False


@dataclass(frozen=True)
class Host:
    """A host: where its hook settings live, their shape, and our bindings.

    Attributes:
        name: as ``--host`` spells it.
        title: as people call it.
        user_file: the user-wide settings file, relative to the home folder.
        project_file: the project's settings file, relative to the project root.
        layout: ``"grouped"`` (event -> [{matcher, hooks: [handler]}]) or
            ``"flat"`` (event -> [handler]).
        timeout_unit: ``"s"`` or ``"ms"``.
        bindings: what we install, in :data:`EVENTS` order; an event may have
            several host events, or none.
        skeleton_version: a top-level ``version`` a new file must carry.
        docs: the URL of the host's hook documentation.
    """

    name: str
    title: str
    user_file: str
    project_file: str
    layout: str
    timeout_unit: str
    bindings: tuple[Binding, ...]
    docs: str
    skeleton_version: int | None = None

    def events(self) -> tuple[str, ...]:
        """Our events this host has, in :data:`EVENTS` order."""
        have = {b.event for b in self.bindings}
        return tuple(e for e in EVENTS if e in have)

    def host_events(self, event: str) -> tuple[str, ...]:
        """The host's events that run our ``event``."""
        return tuple(b.host_event for b in self.bindings if b.event == event)

    def event_for(self, host_event: str) -> str | None:
        """Our event for one of the host's, if we bind it."""
        for b in self.bindings:
            if b.host_event == host_event:
                return b.event
        return None

    def path(self, where: str, *, home: Path, project: Path) -> Path:
        """The settings file for ``where`` (``"user"`` or ``"project"``)."""
        if where == "user":
            return home / self.user_file
        if where == "project":
            return project / self.project_file
        raise ValueError(f"where must be 'user' or 'project', not {where!r}")


_CLAUDE_EDITS = "Edit|Write|MultiEdit|NotebookEdit|Bash"
_SOURCES = "startup|resume|clear|compact"

HOSTS: dict[str, Host] = {
    "claude-code": Host(
        name="claude-code",
        title="Claude Code",
        user_file=".claude/settings.json",
        project_file=".claude/settings.json",
        layout="grouped",
        timeout_unit="s",
        bindings=(
            Binding("session-start", "SessionStart", _SOURCES, CONTEXT_TIMEOUT),
            Binding("prompt", "UserPromptSubmit", None, CONTEXT_TIMEOUT),
            Binding("tool", "PostToolUse", _CLAUDE_EDITS, CAPTURE_TIMEOUT, background=True),
            Binding("tool", "PostToolUseFailure", _CLAUDE_EDITS, CAPTURE_TIMEOUT, background=True),
            Binding("stop", "Stop", None, CAPTURE_TIMEOUT, background=True),
            Binding("compact", "PreCompact", None, CAPTURE_TIMEOUT, background=True),
            # SessionEnd hooks share a short budget that a longer timeout raises,
            # and a background one may be killed at teardown: keep it short and sync.
            Binding("session-end", "SessionEnd", None, 5),
        ),
        docs="https://code.claude.com/docs/en/hooks",
    ),
    "codex": Host(
        name="codex",
        title="OpenAI Codex CLI",
        user_file=".codex/hooks.json",
        project_file=".codex/hooks.json",
        layout="grouped",
        timeout_unit="s",
        # Codex skips handlers marked async, and has no SessionEnd.
        bindings=(
            Binding("session-start", "SessionStart", _SOURCES, CONTEXT_TIMEOUT),
            Binding("prompt", "UserPromptSubmit", None, CONTEXT_TIMEOUT),
            Binding("tool", "PostToolUse", "Bash|apply_patch", CAPTURE_TIMEOUT),
            Binding("stop", "Stop", None, CAPTURE_TIMEOUT),
            Binding("compact", "PreCompact", None, CAPTURE_TIMEOUT),
        ),
        docs="https://developers.openai.com/codex/hooks",
    ),
    "cursor": Host(
        name="cursor",
        title="Cursor",
        user_file=".cursor/hooks.json",
        project_file=".cursor/hooks.json",
        layout="flat",
        timeout_unit="s",
        bindings=(
            Binding("session-start", "sessionStart", None, CONTEXT_TIMEOUT),
            Binding("prompt", "beforeSubmitPrompt", None, CONTEXT_TIMEOUT),
            Binding("tool", "postToolUse", None, CAPTURE_TIMEOUT),
            Binding("tool", "postToolUseFailure", None, CAPTURE_TIMEOUT),
            # `stop` carries only a status; the answer comes with afterAgentResponse.
            Binding("stop", "afterAgentResponse", None, CAPTURE_TIMEOUT),
            Binding("compact", "preCompact", None, CAPTURE_TIMEOUT),
            Binding("session-end", "sessionEnd", None, CAPTURE_TIMEOUT),
        ),
        docs="https://cursor.com/docs/agent/hooks",
        skeleton_version=1,
    ),
    "gemini": Host(
        name="gemini",
        title="Gemini CLI",
        user_file=".gemini/settings.json",
        project_file=".gemini/settings.json",
        layout="grouped",
        timeout_unit="ms",
        bindings=(
            Binding("session-start", "SessionStart", "*", CONTEXT_TIMEOUT * 1000),
            Binding("prompt", "BeforeAgent", "*", CONTEXT_TIMEOUT * 1000),
            Binding(
                "tool",
                "AfterTool",
                "run_shell_command|write_file|replace",
                CAPTURE_TIMEOUT * 1000,
            ),
            Binding("stop", "AfterAgent", "*", CAPTURE_TIMEOUT * 1000),
            Binding("compact", "PreCompress", "*", CAPTURE_TIMEOUT * 1000),
            Binding("session-end", "SessionEnd", "*", CAPTURE_TIMEOUT * 1000),
        ),
        docs="https://github.com/google-gemini/gemini-cli/blob/main/docs/hooks/reference.md",
    ),
    "vscode": Host(
        name="vscode",
        title="VS Code (agent hooks)",
        user_file=".copilot/hooks/prime-memory.json",
        project_file=".github/hooks/prime-memory.json",
        layout="flat",
        timeout_unit="s",
        # VS Code ignores matchers, and has no SessionEnd.
        bindings=(
            Binding("session-start", "SessionStart", None, CONTEXT_TIMEOUT),
            Binding("prompt", "UserPromptSubmit", None, CONTEXT_TIMEOUT),
            Binding("tool", "PostToolUse", None, CAPTURE_TIMEOUT),
            Binding("stop", "Stop", None, CAPTURE_TIMEOUT),
            Binding("compact", "PreCompact", None, CAPTURE_TIMEOUT),
        ),
        docs="https://code.visualstudio.com/docs/agent-customization/hooks",
    ),
}


def hook_command(executable: str, host: str, event: str) -> str:
    """The shell command a hook entry runs: ``EXE hook EVENT --host HOST``.

    Raises:
        ValueError: ``host`` or ``event`` is unknown.
    """
    if host not in HOSTS:
        raise ValueError(f"unknown host {host!r}; hosts: {', '.join(HOSTS)}")
    if event not in EVENTS:
        raise ValueError(f"unknown event {event!r}; events: {', '.join(EVENTS)}")
    return f"{shlex.quote(executable)} hook {event} --host {host}"


_OURS = re.compile(r"\shook\s+(?P<event>[a-z-]+)\s+--host\s+(?P<host>[a-z-]+)\s*$")


def is_ours(command: object, host: str, executable: str | None = None) -> str | None:
    """Our event, when ``command`` is a hook entry ours for ``host``, else None.

    An entry is ours when it runs ``hook EVENT --host HOST`` from ``executable``
    or from any executable named prime-memory, wherever that is now.
    """
    if not isinstance(command, str):
        return None
    found = _OURS.search(command)
    if found is None or found["host"] != host or found["event"] not in EVENTS:
        return None
    head = command[: found.start()].strip()
    if head[:1] in ("'", '"'):
        try:
            words = shlex.split(head)
        except ValueError:
            return None
        if len(words) != 1:
            return None
        program = words[0]
    elif head and not any(c.isspace() for c in head):
        program = head  # unquoted, so a Windows path keeps its backslashes
    else:
        return None
    name = re.split(r"[\\/]", program)[-1]
    if name in EXECUTABLE_NAMES or (executable is not None and program == executable):
        return found["event"]
    if executable is not None and os.path.basename(executable) == name:
        return found["event"]
    return None
