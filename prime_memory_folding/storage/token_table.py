"""The access-token table's SQL, the same on every backend.

Each function takes the store's connection as SQL modules see it: ``execute``
with ``?`` placeholders (:class:`sqlite3.Connection`, or the PostgreSQL
store's :class:`~.postgres.SqlConnection`). Call the writing ones inside the
store's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidInput
from .base import TokenRow

__all__ = ["TokenTable", "add_token", "revoke_token", "token_by_hash", "tokens"]

_TOKEN_COLUMNS = "name, token_hash, scopes, read_only, created_at, revoked_at"


def _token_row(row: Sequence[Any]) -> TokenRow:
    return TokenRow(
        name=row[0],
        token_hash=row[1],
        scopes=tuple(json.loads(row[2])),
        read_only=bool(row[3]),
        created_at=row[4],
        revoked_at=row[5],
    )


def add_token(db: Any, row: TokenRow) -> None:
    """Keep a new token. Call inside a transaction.

    Raises:
        InvalidInput: a live token already has this name, or any token this hash.
    """
    if db.execute(
        "SELECT 1 FROM tokens WHERE name = ? AND revoked_at IS NULL", (row.name,)
    ).fetchone():
        raise InvalidInput(
            f"a live token named {row.name!r} exists already; revoke it first "
            f"(prime-memory token revoke {row.name}) or choose another name"
        )
    if db.execute("SELECT 1 FROM tokens WHERE token_hash = ?", (row.token_hash,)).fetchone():
        raise InvalidInput("a token with this secret exists already; generate a new secret")
    db.execute(
        "INSERT INTO tokens (name, token_hash, scopes, read_only, created_at, revoked_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            row.name,
            row.token_hash,
            json.dumps(list(row.scopes)),
            int(row.read_only),
            row.created_at,
            row.revoked_at,
        ),
    )


def tokens(db: Any) -> list[TokenRow]:
    """Every token, revoked ones too, oldest first."""
    return [
        _token_row(row)
        for row in db.execute(f"SELECT {_TOKEN_COLUMNS} FROM tokens ORDER BY created_at, id")
    ]


def token_by_hash(db: Any, token_hash: str) -> TokenRow | None:
    """The token with this hash, live or revoked, or None."""
    row = db.execute(
        f"SELECT {_TOKEN_COLUMNS} FROM tokens WHERE token_hash = ?", (token_hash,)
    ).fetchone()
    return None if row is None else _token_row(row)


def revoke_token(db: Any, name: str, when: float) -> bool:
    """Revoke the live token of ``name``. Call inside a transaction.

    Returns False when no live token has that name.
    """
    done = db.execute(
        "UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", (when, name)
    )
    return bool(done.rowcount > 0)


class TokenTable:
    """The :class:`~.base.TokenStore` methods of a store whose ``db`` runs this module's SQL.

    Both backends inherit it, so the four methods exist once.
    """

    db: Any

    def add_token(self, row: TokenRow) -> None:
        add_token(self.db, row)

    def tokens(self) -> list[TokenRow]:
        return tokens(self.db)

    def token_by_hash(self, token_hash: str) -> TokenRow | None:
        return token_by_hash(self.db, token_hash)

    def revoke_token(self, name: str, when: float) -> bool:
        return revoke_token(self.db, name, when)
