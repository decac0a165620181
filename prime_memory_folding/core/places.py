"""Where a store lives by default, and the data folder beside it.

``$PRIME_MEMORY_STORE`` names a store (a file or a ``postgresql://`` URL);
else it is ``memory.db`` in the data folder: ``$PRIME_MEMORY_HOME``, else the
per-user data folder (platformdirs). Hooks keep their spool and their log in
the data folder too. Standard library and platformdirs only, so that a hook
process can ask without loading the engine.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HOME_ENV", "STORE_ENV", "data_folder", "default_store", "default_store_path"]

STORE_ENV = "PRIME_MEMORY_STORE"
HOME_ENV = "PRIME_MEMORY_HOME"


def data_folder() -> Path:
    """``$PRIME_MEMORY_HOME``, else the per-user data folder."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("prime-memory-folding", appauthor=False))


def default_store_path() -> Path:
    """``memory.db`` in the data folder (:func:`data_folder`)."""
    return data_folder() / "memory.db"


def default_store() -> str:
    """``$PRIME_MEMORY_STORE`` (a file or a ``postgresql://`` URL), else the default file."""
    return os.environ.get(STORE_ENV, "").strip() or str(default_store_path())
