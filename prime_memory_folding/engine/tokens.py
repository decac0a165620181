"""Per-user access tokens: who may call the HTTP server, and which scopes they may touch.

A token belongs to one user (its ``name``) and carries scope patterns:

- ``*``: every scope;
- ``project:*``, ``team:*``, ``user:*``: every scope of that kind;
- an exact scope name: ``global``, ``project:github.com/acme/api``, ``team:platform``.

The user's own scope ``user:<name>`` is always allowed. A read sees the scopes
it would otherwise see, narrowed to those the token allows; a write to a scope
outside them, or any write with a read-only token, is refused.

The secret is ``pmf_`` followed by 32 random bytes (``secrets.token_urlsafe``)
and is shown once, when the token is made. The store keeps only its SHA-256.
A fast hash is the right one here: a password needs a slow hash because it is
guessable, but 256 random bits cannot be guessed however fast each guess is,
and a fast hash lets the server check the token on every request. A lookup
goes by the hash; the hash found is then compared with the one computed in
constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from ..core.scopes import ALL, GLOBAL, SCOPE_KINDS, ScopeResolution, normalise_scope
from ..errors import InvalidInput
from ..storage.base import Storage, TokenRow, TokenStore

__all__ = [
    "CREATED_BY",
    "DEFAULT_SCOPES",
    "MIN_TOKEN_CHARS",
    "PREFIX",
    "Grant",
    "add",
    "allows",
    "default_scope",
    "generate_secret",
    "hash_secret",
    "live_tokens",
    "normalise_name",
    "normalise_patterns",
    "readable",
    "revoke",
    "verify",
]

#: The shortest shared secret a server accepts (``--token``), the MCP server's and
#: the inspector's alike; secrets the store makes are far longer.
MIN_TOKEN_CHARS = 16
#: What every secret starts with, so that one is recognisable in a config file or a leak scan.
PREFIX = "pmf_"
#: The scope patterns of a token made without any.
DEFAULT_SCOPES = ("project:*", GLOBAL)
#: The metadata key that names the user whose token created a record. Once set,
#: reinforcing the record keeps it.
CREATED_BY = "created_by"
#: The longest user name.
MAX_NAME_CHARS = 64

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def generate_secret() -> str:
    """A new secret: :data:`PREFIX` and 32 random bytes, URL-safe."""
    return PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """The hex SHA-256 of a secret, as the store keeps it."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def normalise_name(name: object) -> str:
    """A user name trimmed and lower-cased, checked like a label.

    Raises:
        InvalidInput: not a string, empty, too long, or characters outside ``a-z0-9._-``.
    """
    if not isinstance(name, str):
        raise InvalidInput(f"a token's name must be a string, got {type(name).__name__}")
    text = name.strip().lower()
    if not text:
        raise InvalidInput("a token's name is empty; give the user's name, e.g. alice")
    if len(text) > MAX_NAME_CHARS or not _NAME.fullmatch(text):
        raise InvalidInput(
            f"token name {name[:80]!r} is malformed: use at most {MAX_NAME_CHARS} characters "
            "of a-z, 0-9, '.', '_' and '-', starting with a letter or digit, e.g. alice"
        )
    return text


def _pattern(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"a scope pattern must be a string, got {type(value).__name__}")
    text = value.strip()
    if text == ALL:
        return ALL
    kind, colon, rest = text.partition(":")
    kind = kind.strip().lower()
    if colon and rest.strip() == "*":
        if kind not in SCOPE_KINDS or kind == GLOBAL:
            kinds = ", ".join(f"{k}:*" for k in sorted(SCOPE_KINDS) if k != GLOBAL)
            raise InvalidInput(f"scope pattern {text[:80]!r} names no scope kind; use {kinds}")
        return f"{kind}:*"
    if "*" in text:
        raise InvalidInput(
            f"scope pattern {text[:80]!r} is malformed: '*' stands alone ('*': every scope) "
            "or after a kind ('project:*'), never inside a name"
        )
    return normalise_scope(text)


def normalise_patterns(values: Iterable[str] | str) -> tuple[str, ...]:
    """Scope patterns checked, normalised and de-duplicated, in order.

    A string is split at commas (``"project:*,global"``).

    Raises:
        InvalidInput: a malformed pattern, or none at all.
    """
    items = values.split(",") if isinstance(values, str) else list(values)
    patterns = tuple(dict.fromkeys(_pattern(item) for item in items if str(item).strip()))
    if not patterns:
        raise InvalidInput(
            "a token needs at least one scope pattern, e.g. 'project:*,global' or '*'"
        )
    return patterns


def _own(name: str) -> str:
    return f"user:{name}"


def allows(row: TokenRow, scope: str) -> bool:
    """Whether the token may touch ``scope`` (a scope name; a malformed one is never allowed)."""
    try:
        name = normalise_scope(scope)
    except InvalidInput:
        return False
    if name == _own(row.name):
        return True
    for pattern in row.scopes:
        if pattern in (ALL, name):
            return True
        if pattern.endswith(":*") and name.startswith(pattern[:-1]):
            return True
    return False


def readable(row: TokenRow, wanted: Iterable[str] | None, held: Iterable[str]) -> list[str]:
    """The scopes a read through the token sees: ``wanted`` narrowed to what it allows.

    ``wanted`` None (or holding ``*``) means every scope the store holds, which
    ``held`` lists. Names the token does not allow drop out; the order of
    ``wanted`` (else ``held``) is kept.
    """
    if wanted is not None:
        items = list(wanted)
        if not any(item.strip() == ALL for item in items):
            names = [normalise_scope(item) for item in items]
            return [name for name in dict.fromkeys(names) if allows(row, name)]
    return [name for name in dict.fromkeys(held) if allows(row, name)]


def default_scope(row: TokenRow) -> str:
    """Where a request through the token writes when it names no project.

    The token's first exact scope other than the user's own, else ``global``.
    """
    for pattern in row.scopes:
        if "*" not in pattern and pattern != _own(row.name):
            return pattern
    return GLOBAL


@dataclass(frozen=True, slots=True)
class Grant:
    """A request acting as a token's user: the token and the scopes that follow from it.

    Attributes:
        token: the live token the request carried.
        resolution: the request's current scope (the project it named, else
            the token's default), the user scope ``user:<name>``, and what a
            read sees before the token narrows it.
    """

    token: TokenRow
    resolution: ScopeResolution

    @classmethod
    def of(cls, token: TokenRow, project: str | None = None) -> Grant:
        """The grant of ``token`` for a request about ``project`` (a scope name), if any."""
        if project is not None:
            current, source, reason = project, "header", "from the request's project header"
        else:
            current, source = default_scope(token), "token"
            reason = f"the default scope of token {token.name!r} (no project header)"
        return cls(
            token=token,
            resolution=ScopeResolution(
                current=current, user=_own(token.name), source=source, reason=reason
            ),
        )

    @property
    def name(self) -> str:
        return self.token.name

    def check_write(self, scope: str) -> None:
        """Refuse a write to ``scope`` that the token may not make.

        Raises:
            InvalidInput: the token is read-only, or ``scope`` is outside its scopes.
        """
        if self.token.read_only:
            raise InvalidInput(
                f"token {self.name!r} is read-only; nothing was changed. Ask for a token "
                "that may write"
            )
        self.check_scope(scope)

    def check_scope(self, scope: str) -> None:
        """Refuse to touch a scope outside the token's.

        Raises:
            InvalidInput: ``scope`` is outside the token's scopes.
        """
        if not allows(self.token, scope):
            allowed = ", ".join(self.token.scopes)
            raise InvalidInput(
                f"scope {scope} is outside token {self.name!r}'s scopes ({allowed}); "
                "nothing was changed. Name one of those scopes, or send another project"
            )


def add(
    storage: Storage,
    name: str,
    scopes: Iterable[str] | str = DEFAULT_SCOPES,
    read_only: bool = False,
    now: float = 0.0,
) -> str:
    """Make a token for ``name`` and return its secret, which is stored nowhere.

    Raises:
        InvalidInput: a malformed name or scope pattern, or a live token with that name.
    """
    user = normalise_name(name)
    patterns = normalise_patterns(scopes)
    own = _own(user)
    if own not in patterns:
        patterns = (*patterns, own)
    secret = generate_secret()
    row = TokenRow(
        name=user,
        token_hash=hash_secret(secret),
        scopes=patterns,
        read_only=bool(read_only),
        created_at=float(now),
    )
    with storage.transaction():
        storage.add_token(row)
    return secret


def revoke(storage: Storage, name: str, now: float) -> TokenRow:
    """Revoke the live token of ``name``; it stops working at the next request.

    Raises:
        InvalidInput: no live token has that name.
    """
    user = normalise_name(name)
    with storage.transaction():
        done = storage.revoke_token(user, float(now))
    if not done:
        live = ", ".join(row.name for row in live_tokens(storage)) or "none"
        raise InvalidInput(f"no live token is named {user!r}; live tokens: {live}")
    revoked = [row for row in storage.tokens() if row.name == user and row.revoked_at is not None]
    return revoked[-1]


def live_tokens(storage: TokenStore) -> list[TokenRow]:
    """The tokens not revoked, oldest first."""
    return [row for row in storage.tokens() if row.revoked_at is None]


def verify(storage: TokenStore, secret: str | bytes | None) -> TokenRow | None:
    """The live token whose secret this is, or None (unknown, revoked or malformed)."""
    if isinstance(secret, bytes):
        try:
            secret = secret.decode("ascii")
        except UnicodeDecodeError:
            return None
    if not secret or not secret.startswith(PREFIX):
        return None
    digest = hash_secret(secret)
    row = storage.token_by_hash(digest)
    if row is None or row.revoked_at is not None:
        return None
    return row if hmac.compare_digest(row.token_hash, digest) else None
