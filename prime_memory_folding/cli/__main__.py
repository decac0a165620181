"""``python -m prime_memory_folding.cli``: the same as ``prime-memory``."""

from . import main

main()
