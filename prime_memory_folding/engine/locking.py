"""The engine's lock: one writer at a time, or any number of readers.

``with lock:`` takes it for writing, as a reentrant lock: the thread that holds
it may take it again, for writing or for reading. ``with lock.shared():`` takes
it for reading: readers run side by side, and a reader may take it for reading
again. A reader may not take it for writing (two readers that both did would
wait on each other for ever); that raises :class:`RuntimeError` at once.

A writer that waits holds back readers that come after it, so a stream of
reads cannot starve a write.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

__all__ = ["ReadWriteLock"]


class ReadWriteLock:
    """Exclusive for writes (``with lock:``), shared for reads (``with lock.shared():``)."""

    def __init__(self) -> None:
        self._state = threading.Condition(threading.Lock())
        self._writer: int | None = None  # the thread that holds it for writing
        self._depth = 0  # how many times the writer took it
        self._readers: dict[int, int] = {}  # each reading thread: how many times
        self._writers_waiting = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock for writing, waiting for every reader and writer to leave.

        As :meth:`threading.Lock.acquire`: without ``blocking``, or past
        ``timeout`` seconds, it gives up and returns False.
        """
        me = threading.get_ident()
        with self._state:
            if self._writer == me:
                self._depth += 1
                return True
            if me in self._readers:
                raise RuntimeError(
                    "the engine's lock is held for reading by this thread; "
                    "it cannot be taken for writing until the read ends"
                )
            free = self._writer is None and not self._readers
            if not free and blocking:
                self._writers_waiting += 1
                try:
                    free = self._state.wait_for(
                        lambda: self._writer is None and not self._readers,
                        None if timeout < 0 else timeout,
                    )
                finally:
                    self._writers_waiting -= 1
                    if not free:  # readers held back by this writer may go on
                        self._state.notify_all()
            if not free:
                return False
            self._writer, self._depth = me, 1
            return True

    def release(self) -> None:
        """Give back one taking for writing."""
        with self._state:
            if self._writer != threading.get_ident():
                raise RuntimeError("the engine's lock is not held for writing by this thread")
            self._depth -= 1
            if self._depth == 0:
                self._writer = None
                self._state.notify_all()

    def writing(self) -> bool:
        """Whether this thread holds the lock for writing."""
        return self._writer == threading.get_ident()

    def __enter__(self) -> ReadWriteLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the lock for reading: beside other readers, never beside a writer."""
        me = threading.get_ident()
        with self._state:
            if self._writer == me:  # a writer reading what it holds
                self._depth += 1
            elif me in self._readers:
                self._readers[me] += 1
            else:
                while self._writer is not None or self._writers_waiting:
                    self._state.wait()
                self._readers[me] = 1
        try:
            yield
        finally:
            with self._state:
                if self._writer == me:  # the writer's own taking is still open
                    self._depth -= 1
                else:
                    left = self._readers[me] - 1
                    if left:
                        self._readers[me] = left
                    else:
                        del self._readers[me]
                        if not self._readers:
                            self._state.notify_all()
