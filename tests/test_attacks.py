"""Attacks by a hostile team member, and by a hostile folder to import (docs/security.md).

Each test here failed before its protection was built: a store's location
reaching MCP clients, an existence oracle for another scope's records, stats
that count what a token may not see, reads that write, imports that follow
links out of their folder, and scope names that only look like others.
"""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding.errors import InvalidInput
from prime_memory_folding.scopes import normalise_scope

# -- look-alike scope names ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("given_name", "offending"),
    [
        ("project:\u0430", "U+0430"),  # Cyrillic a, alone: reads as project:a
        ("project:\u0430pi", "U+0430"),  # Cyrillic a among Latin letters
        ("project:github.com/\u0430\u0441me/api", "U+0441"),
        ("team:\u03b1lpha", "U+03B1"),  # Greek alpha
        ("user:\u0441\u043e\u0440\u0435", "U+0440"),  # "cope" in Cyrillic look-alikes
    ],
)
def test_a_scope_in_look_alike_letters_is_refused_naming_them(
    given_name: str, offending: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(offending)):
        normalise_scope(given_name)


@pytest.mark.parametrize(
    ("given_name", "expected"),
    [
        ("\uff50\uff52\uff4f\uff4a\uff45\uff43\uff54:\uff41", "project:a"),  # fullwidth
        ("project:\ufb01les", "project:files"),  # the fi ligature
        ("project:\u65e5\u672c", "project:\u65e5\u672c"),
        ("project:github.com/acme/\u65e5\u672c\u8a9e\u30c9\u30ad\u30e5\u30e1\u30f3\u30c8", None),
        ("team:\ud55c\uad6d", None),
        ("project:\u043f\u0440\u043e\u0435\u043a\u0442", None),  # Cyrillic, not only look-alikes
        ("project:/home/\u0438\u0432\u0430\u043d/notes", None),  # folders in two scripts
        ("project:github.com/acme/api", None),
        ("user:alice", None),
        ("team:platform", None),
    ],
)
def test_valid_names_keep_working_and_compatibility_forms_are_one_name(
    given_name: str, expected: str | None
) -> None:
    assert normalise_scope(given_name) == (expected or given_name)


@given(st.text(min_size=1, max_size=12))
def test_a_scope_name_normalises_to_a_fixed_point(name: str) -> None:
    try:
        once = normalise_scope(f"team:{name}")
    except InvalidInput:
        return
    assert normalise_scope(once) == once
    assert unicodedata.normalize("NFKC", once) == once
