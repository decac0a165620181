"""What a word is, and how a planned text query picks the words that choose its candidates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from prime_memory_folding.core.words import check_text, choose_rare, content_words
from prime_memory_folding.errors import InvalidInput


@given(
    st.dictionaries(st.text("abcdef", min_size=1, max_size=4), st.integers(0, 1_000), min_size=1),
    st.integers(1, 2_000),
    st.integers(0, 1_500),
)
def test_the_rarest_words_choose_within_the_budget(
    matches: dict[str, int], total: int, budget: int
) -> None:
    chosen, others = choose_rare(list(matches), matches.__getitem__, total, budget)
    kept = [*chosen, *others]
    assert chosen, "the rarest word always chooses"
    assert len(set(kept)) == len(kept) and set(kept) <= set(matches)
    assert [matches[w] for w in kept] == sorted(matches[w] for w in kept)
    common = [w for w in matches if matches[w] > total / 2]
    if len(common) < len(matches):
        assert not set(kept) & set(common)  # a word in over half the store is left out
    else:
        assert chosen == [min(matches, key=matches.__getitem__)] and not others
    if len(chosen) > 1:
        assert sum(matches[w] for w in chosen) <= budget
    if others:
        assert sum(matches[w] for w in chosen) + matches[others[0]] > budget


def test_a_querys_content_words_leave_out_stop_words_unless_nothing_else_is_left() -> None:
    assert content_words("What is the Plan for the plan?") == ["plan"]
    assert content_words("what is it") == ["what", "is", "it"]
    assert content_words("東京 deploy") == ["deploy"]  # scripts without spaces go in pieces


@pytest.mark.parametrize(("text", "message"), [(3, "string"), ("  ", "empty"), ("a\x00b", "NUL")])
def test_a_bad_text_is_refused_with_what_is_wrong(text: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        check_text(text)
