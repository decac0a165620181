"""recall/restate.py: whether a newer memory restates an older one with another value."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prime_memory_folding.recall import restate
from prime_memory_folding.recall.restate import change

# -- changed values ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("We use PostgreSQL 15", "We moved to PostgreSQL 16", "15 -> 16"),
        ("The project runs on Python 3.11.", "The project runs on Python 3.12.", "3.11 -> 3.12"),
        ("The payments API is v2.", "The payments API is v3.", "v2 -> v3"),
        ("The HTTP client retries 3 times.", "The HTTP client retries 5 times.", "3 -> 5"),
        ("Default timeout is 30 s.", "Default timeout is 60 s.", "30 -> 60"),
        ("I lead a team of four engineers.", "I lead a team of five engineers.", "four -> five"),
        # the new number said first, the old one kept further on
        (
            "The reporting service uses MySQL 5.7.",
            "The reporting service uses MySQL 8.0 since the 5.7 end of life.",
            "5.7 -> 8.0",
        ),
    ],
)
def test_a_changed_number_or_version_is_named(old: str, new: str, said: str) -> None:
    assert change(old, new) == said


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            "Requests go through auth-service for tokens.",
            "Requests go through identity-service for tokens.",
            "auth-service -> identity-service",
        ),
        ("We use Jest for unit tests.", "We use Vitest for unit tests.", "Jest -> Vitest"),
        ("For packaging we use poetry.", "For packaging we use uv.", "poetry -> uv"),
        ("The cache layer is Redis 7.2.", "The cache layer is Valkey 7.2.", "Redis -> Valkey"),
        (
            "Search runs on Elasticsearch 7.10.",
            "Search runs on OpenSearch 2.11.",
            "Elasticsearch 7.10 -> OpenSearch 2.11",
        ),
    ],
)
def test_a_changed_name_is_named(old: str, new: str, said: str) -> None:
    assert change(old, new) == said


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("Caching is enabled in production.", "Caching is disabled in production.",
         "enabled -> disabled"),
        ("We will ship the beta on Friday.", "We won't ship the beta on Friday.", "will -> won't"),
        ("We use Redux for global state.", "We no longer use Redux for global state.",
         "use -> no longer use"),
        ("Dark mode is on by default.", "Dark mode is off by default.", "on -> off"),
        ("Telemetry: true", "Telemetry: false", "true -> false"),
        ("Tests run with nose.", "Tests run with pytest; nose is unmaintained.",
         "nose -> nose unmaintained"),
    ],
)  # fmt: skip
def test_a_flipped_polarity_is_named(old: str, new: str, said: str) -> None:
    assert change(old, new) == said


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("Tests use Jest.", "We switched from Jest to Vitest for tests.", "Jest -> Vitest"),
        ("CI runs on Travis CI.", "CI moved from Travis CI to GitHub Actions.",
         "Travis CI -> GitHub Actions"),
        ("We use Jest for unit tests.", "Use Vitest instead of Jest for unit tests.",
         "Jest -> Vitest"),
        ("The build uses webpack.", "Build step: webpack -> vite", "webpack -> vite"),
    ],
)  # fmt: skip
def test_a_stated_switch_is_named(old: str, new: str, said: str) -> None:
    assert change(old, new) == said


def test_a_reversed_decision_names_what_was_dropped() -> None:
    said = change(
        "We use Redux for global state.", "We removed Redux and use React context for global state."
    )
    assert said is not None and "removed" in said


# -- no change --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the same text, or the same words in another case and spacing
        ("We use PostgreSQL 15.", "We use PostgreSQL 15."),
        ("We use PostgreSQL 15.", "we  use postgresql 15"),
        # detail added
        ("We use PostgreSQL 15", "We use PostgreSQL 15 with the pgvector extension"),
        ("We deploy from main", "We deploy from main, not from release branches"),
        ("Unit tests use Vitest.", "Unit tests use Vitest with jsdom as the environment."),
        ("Feature flags are enabled in staging.",
         "Feature flags are enabled in staging, managed in Unleash."),
        # the same value in other words or order
        ("Static files are served by WhiteNoise.",
         "WhiteNoise serves the static files in production."),
        ("The main database is PostgreSQL 16.",
         "PostgreSQL 16 is the main database, with daily base backups."),
        ("The minimum supported Python is 3.9.", "We support Python 3.9 and newer."),
        # another subject: two facts, not one restated
        ("Staging uses Redis 7", "Production uses Redis 7"),
        ("The staging cluster has 3 nodes.", "The production cluster has 5 nodes."),
        ("The API timeout is 30 s", "The gateway timeout is 60 s"),
        # numbers that name things are not values
        ("Incident #4512: login failed for Safari users.",
         "Incident #4513: login failed for Firefox users."),
        # another statement about the same thing
        ("Version 2.0 removed the legacy config loader.",
         "Version 2.1 added a TOML config loader."),
        ("The admin is only reachable over the VPN.",
         "The admin site uses the default Django login page."),
        # a word's other form, and hedging
        ("We use Redis for caching.", "We used Redis for caching."),
        ("I think we should use Redis", "We decided to use Redis"),
        # unrelated
        ("The package manager is pnpm.", "Storybook runs on port 6006."),
    ],
)  # fmt: skip
def test_no_change_is_named_where_no_value_changed(old: str, new: str) -> None:
    assert change(old, new) is None


def test_blank_and_wordless_texts_change_nothing() -> None:
    for old, new in [("", ""), ("", "We use PostgreSQL 15"), ("...", "!!!"), (" ", "v2")]:
        assert change(old, new) is None


def test_the_arrow_follows_the_order_given() -> None:
    assert change("We use PostgreSQL 16", "We use PostgreSQL 15") == "16 -> 15"
    assert change("We use PostgreSQL 15", "We use PostgreSQL 16") == "15 -> 16"


def test_only_the_start_of_a_long_text_is_read() -> None:
    start = "The service runs on Python 3.11. "
    filler = "It also serves the admin pages for the billing team every day. " * 40
    assert len(start + filler) > restate.MAX_CHARS
    assert change(start + filler, start.replace("3.11", "3.12") + filler) == "3.11 -> 3.12"
    # a change past the end of what is read is not seen
    assert change(start + filler + "Its port is 80.", start + filler + "Its port is 81.") is None


def test_a_call_is_fast_on_long_texts() -> None:
    old = "I have been running every morning and my best 5K time is 27:12. " * 30
    new = "I have been running every evening and my best 5K time is 25:50. " * 30
    change(old, new)
    started = time.perf_counter()
    for _ in range(20):
        change(old, new)
    assert (time.perf_counter() - started) / 20 < 0.02  # well under a millisecond on a laptop


# -- properties ---------------------------------------------------------------------------

VOCABULARY = (
    "we use the api is v1 v2 3.11 3.12 15 16 not don't enabled disabled from to instead of "
    "replaced with Redis Valkey jest Vitest auth-service deprecated removed # -> . , ; no "
    "longer PostgreSQL service timeout retries staging production"
)
WORDS = st.sampled_from(VOCABULARY.split())
SENTENCES = st.lists(WORDS, min_size=0, max_size=14).map(" ".join)


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_a_text_never_changes_itself(text: str) -> None:
    assert change(text, text) is None


@given(st.text(max_size=300), st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_text_is_answered_without_raising(old: str, new: str) -> None:
    said = change(old, new)
    assert said is None or (isinstance(said, str) and " -> " in said)


@given(SENTENCES, SENTENCES)
@settings(max_examples=500, deadline=None)
def test_detection_is_symmetric(a: str, b: str) -> None:
    assert (change(a, b) is None) == (change(b, a) is None)


@given(SENTENCES)
@settings(max_examples=300, deadline=None)
def test_case_and_spacing_change_nothing(text: str) -> None:
    assert change(text, "  ".join(text.upper().split())) is None


@given(
    st.sampled_from(["The main database", "Our CI image", "The build host"]),
    st.sampled_from(["PostgreSQL", "Python", "Node"]),
    st.integers(1, 40),
    st.integers(1, 40),
)
@settings(max_examples=200, deadline=None)
def test_a_changed_version_in_one_sentence_is_always_found(
    subject: str, name: str, before: int, after: int
) -> None:
    old, new = f"{subject} runs {name} {before}.", f"{subject} runs {name} {after}."
    said = change(old, new)
    if before == after:
        assert said is None
    else:
        assert said == f"{before} -> {after}"
        assert change(new, old) == f"{after} -> {before}"


@given(SENTENCES, SENTENCES)
@settings(max_examples=500, deadline=None)
def test_the_other_order_names_each_change_reversed(a: str, b: str) -> None:
    said = change(a, b)
    if said is not None:
        parts = [part.split(" -> ") for part in said.split("; ")]
        assert all(len(part) == 2 for part in parts)
        assert change(b, a) == "; ".join(f"{new} -> {old}" for old, new in parts)
