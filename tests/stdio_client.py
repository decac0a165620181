"""A raw JSON-RPC line client for the stdio server, shared by the reliability tests.

It speaks to a real ``python -m prime_memory_folding.mcp.server`` process: one
JSON object per line in, one per line out, read by a thread so that every wait
has a timeout.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

TIMEOUT = 60  # seconds; generous, since CI machines may be busy
SERVER = [sys.executable, "-m", "prime_memory_folding.mcp.server"]
PROTOCOL_VERSION = "2025-11-25"


class StdioServer:
    """The server as a subprocess; ``frames`` holds every parsed stdout line."""

    def __init__(
        self,
        store: Path,
        env: dict[str, str] | None = None,
        *,
        cwd: Path | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.proc = subprocess.Popen(
            [*SERVER, "--store", str(store), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        self.frames: queue.Queue[Any] = queue.Queue()
        self.stray: list[bytes] = []
        self.stderr = b""
        self._ids = itertools.count(1_000_000)
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.frames.put(json.loads(line))
            except ValueError:
                self.stray.append(line)
        self.frames.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send_raw(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode())

    def recv(self) -> Any:
        frame = self.frames.get(timeout=TIMEOUT)
        if frame is None:
            raise AssertionError(
                f"the server exited; stderr: {self.stderr.decode(errors='replace')[-2000:]}"
            )
        return frame

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send a request and wait for its answer (answers to others are not expected)."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        frame = self.recv()
        assert frame.get("id") == request_id, frame
        return frame

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tools/call; returns its result (the frame must not be a protocol error)."""
        frame = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in frame, frame
        result: dict[str, Any] = frame["result"]
        return result

    def handshake(self, capabilities: dict[str, Any] | None = None) -> None:
        reply = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "pytest", "version": "1"},
            },
        )
        assert "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> int:
        """Close stdin and wait for a clean exit; kills the process if it hangs."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for reader in self._readers:
                reader.join(timeout=TIMEOUT)
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()
