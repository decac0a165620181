"""Pause Python's cyclic garbage collector around bulk work.

A full collection walks every live container object. A large store keeps many
of them alive (the structural index, a fold's snapshot), and bulk work
allocates fast enough to trigger full collections again and again, each one
walking all of those objects. Reference counting still frees almost
everything at once; only reference cycles wait until the outermost pause ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; nests and is thread-safe.

    The collector is re-enabled when the last open pause ends, and only if it
    was enabled when the first one began.
    """
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
