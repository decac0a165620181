"""Access tokens as rules: names, patterns, hashing, verify, allows and the read intersection."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding import InvalidInput
from prime_memory_folding.core.scopes import named_project
from prime_memory_folding.engine import tokens
from prime_memory_folding.storage import Storage, TokenRow, open_storage

KINDS = ("project", "team", "user")


def open_store(path: Path | str) -> Storage:
    return open_storage(path)


def _row(name: str, *patterns: str, read_only: bool = False) -> TokenRow:
    return TokenRow(
        name=name,
        token_hash="0" * 64,
        scopes=tuple(patterns),
        read_only=read_only,
        created_at=0.0,
    )


# -- the set model -------------------------------------------------------------------------


def _members(pattern: str, universe: set[str]) -> set[str]:
    """The scopes of ``universe`` a pattern stands for, by plain set semantics."""
    if pattern == "*":
        return set(universe)
    if pattern.endswith(":*"):
        kind = pattern[:-2]
        return {scope for scope in universe if scope.split(":", 1)[0] == kind and ":" in scope}
    return {pattern} & universe


scope_names = st.one_of(
    st.just("global"),
    st.builds(
        lambda kind, name: f"{kind}:{name}",
        st.sampled_from(KINDS),
        st.sampled_from(["a", "b", "alice", "bob", "x.y"]),
    ),
)
patterns = st.one_of(
    st.just("*"),
    st.sampled_from([f"{kind}:*" for kind in KINDS]),
    scope_names,
)


@given(
    name=st.sampled_from(["alice", "bob"]),
    given_patterns=st.lists(patterns, max_size=4),
    universe=st.sets(scope_names, max_size=10),
    wanted=st.one_of(st.none(), st.lists(scope_names, max_size=6)),
)
def test_allows_and_readable_match_set_semantics(
    name: str, given_patterns: list[str], universe: set[str], wanted: list[str] | None
) -> None:
    row = _row(name, *given_patterns)
    everything = universe | set(wanted or ()) | {f"user:{name}"}
    allowed = {f"user:{name}"}.union(*(_members(p, everything) for p in given_patterns))
    for scope in everything:
        assert tokens.allows(row, scope) == (scope in allowed)
    seen = tokens.readable(row, wanted, sorted(universe))
    expected = (set(universe) if wanted is None else set(wanted)) & allowed
    assert set(seen) == expected
    assert len(seen) == len(set(seen))
    assert set(tokens.readable(row, ["*"], sorted(universe))) == set(universe) & allowed


@given(st.lists(patterns, min_size=1, max_size=5))
def test_patterns_normalise_to_a_fixed_point(given_patterns: list[str]) -> None:
    once = tokens.normalise_patterns(given_patterns)
    assert tokens.normalise_patterns(once) == once
    assert tokens.normalise_patterns(",".join(given_patterns)) == once
    assert set(once) == set(given_patterns)


# -- patterns and names ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        (" * ", ("*",)),
        ("Project:*, GLOBAL", ("project:*", "global")),
        (["team:*", "team:*", "user:Bob"], ("team:*", "user:bob")),
        ("project:github.com/Acme/API", ("project:github.com/acme/api",)),
    ],
)
def test_patterns_are_normalised(raw: str | list[str], normalised: tuple[str, ...]) -> None:
    assert tokens.normalise_patterns(raw) == normalised


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("global:*", "names no scope kind"),
        ("planet:*", "names no scope kind"),
        ("project:acme*", "never inside a name"),
        ("**", "never inside a name"),
        ("project:", "needs a name"),
        ("", "at least one"),
        ("nokind", "no kind"),
    ],
)
def test_bad_patterns_are_refused(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidInput, match=fragment):
        tokens.normalise_patterns(raw)


@pytest.mark.parametrize("name", ["", "  ", "a b", "al!ce", "-alice", "x" * 65, "é"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidInput, match="name"):
        tokens.normalise_name(name)


def test_names_are_normalised_like_labels() -> None:
    assert tokens.normalise_name("  Alice.Smith_2-x ") == "alice.smith_2-x"


def test_the_default_scope_is_the_first_exact_one_else_global() -> None:
    assert tokens.default_scope(_row("a", "project:*", "team:x", "global")) == "team:x"
    assert tokens.default_scope(_row("a", "project:*", "user:a")) == "global"
    assert tokens.default_scope(_row("a", "user:a", "project:p")) == "project:p"


def test_a_grant_checks_writes() -> None:
    grant = tokens.Grant.of(_row("a", "project:*"), "project:x")
    assert grant.resolution.current == "project:x"
    assert grant.resolution.visible == ("project:x", "user:a", "global")
    grant.check_write("project:y")
    grant.check_write("user:a")
    with pytest.raises(InvalidInput, match="outside"):
        grant.check_write("global")
    reader = tokens.Grant.of(_row("r", "*", read_only=True))
    with pytest.raises(InvalidInput, match="read-only"):
        reader.check_write("global")


@pytest.mark.parametrize(
    ("header", "scope"),
    [
        ("project:github.com/Acme/api", "project:github.com/acme/api"),
        ("global", "global"),
        ("git@github.com:Acme/api.git", "project:github.com/acme/api"),
        ("https://user:pw@github.com/acme/api/", "project:github.com/acme/api"),
        ("/home/me/Code/api", "project:/home/me/code/api"),
    ],
)
def test_a_named_project_is_a_scope_or_a_remote(header: str, scope: str) -> None:
    assert named_project(header) == scope


# -- secrets ------------------------------------------------------------------------------------


def test_secrets_are_new_prefixed_and_stored_hashed(backend_store: str) -> None:
    storage = open_store(backend_store)
    first = tokens.add(storage, "alice", "project:*", now=1.0)
    second = tokens.add(storage, "bob", "*", read_only=True, now=2.0)
    assert first.startswith(tokens.PREFIX) and second.startswith(tokens.PREFIX)
    assert first != second and len(first) >= len(tokens.PREFIX) + 43
    rows = storage.tokens()
    assert [row.token_hash for row in rows] == [
        tokens.hash_secret(first),
        tokens.hash_secret(second),
    ]
    assert rows[0].scopes == ("project:*", "user:alice")
    assert tokens.verify(storage, first) == rows[0]
    assert tokens.verify(storage, second.encode()) == rows[1]
    for wrong in (None, "", first + "x", first[:-1], tokens.PREFIX, "x" + first, b"\xff"):
        assert tokens.verify(storage, wrong) is None
    tokens.revoke(storage, "alice", now=3.0)
    assert tokens.verify(storage, first) is None
    assert [row.name for row in tokens.live_tokens(storage)] == ["bob"]
    with pytest.raises(InvalidInput, match="no live token"):
        tokens.revoke(storage, "alice", now=4.0)
    storage.close()
