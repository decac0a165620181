"""The hooks' log: ``hooks.log`` in the data folder, one redacted line an event.

A hook writes nothing to standard error (some hosts show it to the user), so
this is where a hook's problems go. The log keeps one old copy when it grows
past :data:`LOG_MAX_BYTES`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from ..core.places import data_folder
from .redact import redact

__all__ = ["LOG_MAX_BYTES", "HookLog"]

#: The log grows to this size, then starts again beside one old copy.
LOG_MAX_BYTES = 1_000_000


class HookLog:
    """The hooks' log, ``hooks.log`` in the data folder: one redacted line per event."""

    def __init__(self, path: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.path = path or data_folder() / "hooks.log"
        self.clock = clock

    def write(self, event: str, message: str) -> None:
        when = datetime.fromtimestamp(self.clock(), timezone.utc).isoformat(timespec="seconds")
        line = " ".join(redact(f"{when} {event}: {message}").text.split())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > LOG_MAX_BYTES:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            with open(self.path, "a", encoding="utf-8") as file:
                file.write(line + "\n")
        except OSError:
            pass  # a log that cannot be written must not fail the hook

    def failure(self, event: str, exc: BaseException) -> None:
        message = str(exc).splitlines()[0] if str(exc) else ""
        self.write(event, f"{type(exc).__name__}: {message}"[:500])
