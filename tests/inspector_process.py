"""``prime-memory ui`` as a subprocess, for the CLI and browser tests of the inspector."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

TIMEOUT = 60  # seconds; generous, since CI machines may be busy


class InspectorProcess:
    """A running inspector; ``url`` is the address it printed, token included."""

    def __init__(self, store: Path, *args: str, sigint_ignored: bool = False) -> None:
        """Start it; ``sigint_ignored`` starts it as a script's background job
        is started: with SIGINT ignored until the server handles it itself."""
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "prime_memory_folding.cli",
                "--store",
                str(store),
                "ui",
                "--port",
                "0",
                "--no-browser",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
            preexec_fn=ignore_sigint if sigint_ignored else None,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr = ""
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self.url = self._wait_for_url()
        self.base = self.url.split("/?", 1)[0]

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def _wait_for_url(self) -> str:
        while True:
            line = self.lines.get(timeout=TIMEOUT)
            if line is None:
                self.proc.wait(timeout=TIMEOUT)
                self.close()
                raise AssertionError(f"the inspector exited: {self.stderr[-2000:]}")
            if line.startswith("Open: "):
                return line.removeprefix("Open: ").strip()

    def close(self) -> str:
        """Stop the server (as Ctrl-C does) and return everything it printed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=TIMEOUT)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return "".join(self.stdout) + self.stderr


def ignore_sigint() -> None:
    """Ignore SIGINT in a child about to start, as a script's background job does."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
