"""The agent's last answer, read from a host's transcript when its hook input lacks it.

Claude Code writes a session's transcript as JSON Lines: one object a line,
``{"type": "assistant", "message": {"role": "assistant", "content": [{"type":
"text", "text": ...}, {"type": "tool_use", ...}]}, ...}`` for the agent's
messages. :func:`last_answer` reads only the file's tail, so a long session
costs no more than a short one, and skips a line it cannot read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["last_answer"]

#: Bytes read from a transcript's end.
TAIL_BYTES = 512 * 1024


def _text_of(entry: Any) -> str:
    """The text blocks of an assistant entry, joined; "" for any other entry."""
    if not isinstance(entry, dict) or entry.get("type") != "assistant":
        return ""
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [
        block.get("text")
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    ]
    return "\n".join(text for text in texts if isinstance(text, str) and text.strip())


def last_answer(path: str | Path) -> str | None:
    """The text of the last assistant message in the transcript at ``path`` that has any."""
    try:
        with open(path, "rb") as file:
            file.seek(0, 2)
            size = file.tell()
            file.seek(max(0, size - TAIL_BYTES))
            tail = file.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            text = _text_of(json.loads(line))
        except ValueError:
            continue
        if text:
            return text
    return None
