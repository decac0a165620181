"""The Host and Origin checks of both HTTP servers (the MCP server and the inspector).

A web page the user visits can make the browser send requests to a server on
the user's machine, and DNS rebinding can make its own host name resolve to
127.0.0.1. Two checks stop that:

- the ``Host`` header must be exactly one the server was started for: its
  bind address and port, ``localhost``, ``127.0.0.1`` and ``[::1]`` with the
  port when it is bound to loopback, and the host names it was told to answer
  to. Host and port both count: ``127.0.0.1:8765`` does not admit
  ``127.0.0.1:8766`` nor ``127.0.0.1:8765.evil.example``;
- an ``Origin`` header, when the request carries one, must be exactly one of
  the allowed origins (scheme, host and port): by default, the allowed hosts
  with ``http://``. A page on another local port is another origin.

Names are compared without regard to case, as DNS compares them. Nothing here
depends on a web framework: both servers call :func:`refusal` on the raw headers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "LOOPBACK_HOSTS",
    "WILDCARD_HOSTS",
    "HostRules",
    "allowed_hosts",
    "is_loopback",
]

#: The names of this machine's loopback interface, as a bind address may give them.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: Bind addresses that listen on every interface.
WILDCARD_HOSTS = ("0.0.0.0", "::")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) reaches only this machine."""
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bracketed(name: str) -> str:
    """An IPv6 address as a Host header writes it: ``[::1]``."""
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def allowed_hosts(host: str, port: int) -> tuple[str, ...]:
    """The ``Host`` header values a server bound to ``host:port`` answers to, sorted.

    The bind address with the port; when it is loopback, or every interface,
    ``localhost``, ``127.0.0.1`` and ``[::1]`` with the port too (a wildcard
    address itself is never a Host).
    """
    names = set() if host in WILDCARD_HOSTS else {host}
    if is_loopback(host) or host in WILDCARD_HOSTS:
        names.update(LOOPBACK_HOSTS)
    return tuple(sorted(f"{_bracketed(name)}:{port}".lower() for name in names))


def _origin(value: str) -> str:
    """An origin as compared: lower case, without a trailing slash."""
    return value.strip().rstrip("/").lower()


@dataclass(frozen=True)
class HostRules:
    """The Host header values and the Origins one server accepts, each matched exactly.

    Attributes:
        hosts: Host header values, ``name:port`` (or ``name`` alone, for a
            host that clients reach on its scheme's default port).
        origins: ``scheme://name[:port]`` values.
    """

    hosts: frozenset[str]
    origins: frozenset[str]

    @classmethod
    def of(
        cls,
        hosts: Iterable[str],
        extra_origins: Iterable[str] = (),
        *,
        schemes: Iterable[str] = ("http",),
    ) -> HostRules:
        """Rules for ``hosts``, whose origins are each host under each of ``schemes``,
        plus ``extra_origins``."""
        names = frozenset(h.strip().lower() for h in hosts if h.strip())
        origins = {f"{scheme}://{name}" for scheme in schemes for name in names}
        origins.update(_origin(o) for o in extra_origins if o.strip())
        return cls(hosts=names, origins=frozenset(origins))

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request's Host header is one of the allowed values exactly."""
        return host is not None and host.strip().lower() in self.hosts

    def origin_allowed(self, origin: str | None) -> bool:
        """Whether a request's Origin header (None: it sent none) is allowed.

        ``Origin: null`` (a sandboxed page, a local file, a redirect) is never allowed.
        """
        return origin is None or _origin(origin) in self.origins

    def refusal(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these headers is refused (``"host"`` or ``"origin"``), or None."""
        if not self.host_allowed(host):
            return "host"
        if not self.origin_allowed(origin):
            return "origin"
        return None
