"""The inspector: a local web app to browse, search, curate and fold memories.

Start it with ``prime-memory ui``; :func:`create_app` builds the ASGI app over
an open engine. The core never imports this package.
"""

from __future__ import annotations

from .app import create_app
from .security import Secrets, allowed_hosts, is_loopback, new_token

__all__ = ["Secrets", "allowed_hosts", "create_app", "is_loopback", "new_token"]
