"""Attacks on the HTTP servers, as a hostile team member and as a hostile web page.

Each test here failed on the server before its fix: a web page's Host and
Origin tricks, a revoked last token that left the door open, a weak shared
token, sessions one token could hoard or another could end, and requests so
large that one client stalled the others. Servers run as real processes on
127.0.0.1 where the attack goes through the network; the rest runs in-process.
"""

from __future__ import annotations

import pytest

from prime_memory_folding.http_guard import HostRules, allowed_hosts, is_loopback

# -- Host and Origin, exactly ------------------------------------------------------------------


@pytest.mark.parametrize("bound", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_a_loopback_server_answers_to_each_loopback_name_on_its_own_port(bound: str) -> None:
    rules = HostRules.of(allowed_hosts(bound, 8765))
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST:8765"):
        assert rules.host_allowed(host), host
    assert is_loopback(bound)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8766",  # another port
        "127.0.0.1",  # no port
        "127.0.0.1:8765.evil.example",
        "localhost:8765.evil.example",
        "evil.example:8765",
        "",
        None,
    ],
)
def test_a_host_that_only_starts_like_an_allowed_one_is_refused(host: str | None) -> None:
    rules = HostRules.of(allowed_hosts("127.0.0.1", 8765))
    assert not rules.host_allowed(host)
    assert rules.refusal(host, None) == "host"


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:1",  # a page on another local port
        "http://127.0.0.1:8766",
        "https://127.0.0.1:8765",  # another scheme
        "http://127.0.0.1:8765.evil.example",
        "http://localhost.evil.example:8765",
        "null",
        "",
    ],
)
def test_an_origin_on_another_port_or_scheme_is_refused(origin: str) -> None:
    rules = HostRules.of(allowed_hosts("127.0.0.1", 8765))
    assert rules.refusal("127.0.0.1:8765", origin) == "origin"


def test_the_servers_own_origins_pass() -> None:
    rules = HostRules.of(allowed_hosts("127.0.0.1", 8765), ["https://app.example"])
    for origin in ("http://127.0.0.1:8765", "http://LOCALHOST:8765/", "https://app.example"):
        assert rules.refusal("localhost:8765", origin) is None, origin
    assert rules.refusal("localhost:8765", None) is None  # no Origin: not a browser page


def test_a_server_bound_beyond_loopback_answers_to_its_own_address_only() -> None:
    assert allowed_hosts("192.0.2.10", 80) == ("192.0.2.10:80",)
    assert set(allowed_hosts("0.0.0.0", 80)) == {"127.0.0.1:80", "localhost:80", "[::1]:80"}
    assert not is_loopback("0.0.0.0") and not is_loopback("memory.lan")
