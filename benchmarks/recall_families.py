"""The families of ideas ``recall_ideas.py --weak`` screens for LoCoMo's weak categories.

Each family is a set of values per field of ``recall_ideas.Idea``; every
combination is one setting, on top of the engine's ranking (its defaults
elsewhere), and the family is tuned leave one conversation out with the
engine's own ranking ("off") among the choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The best "questions" setting with the best lexical feedback, which later families build on.
_QUESTIONS_AND_FEEDBACK: dict[str, Sequence[Any]] = dict(
    ask_kind=("only",), ask_penalty=(0.3,), ask_lend=(0.2,), lend_docs=(5,), lend_weight=(0.2,)
)

FAMILIES: dict[str, dict[str, Sequence[Any]]] = {
    "lexical feedback: the first hits lend words": dict(
        lend_docs=(3, 5), lend_words=(5, 10), lend_weight=(0.2, 0.4)
    ),
    "vector feedback: query + mean of the first hits": dict(
        feedback=(3, 5), feedback_weight=(0.3, 0.6)
    ),
    "second hop: likeness to the first hits": dict(hop_docs=(1, 3, 5), hop_weight=(0.05, 0.1, 0.3)),
    "second hop, among the candidates only": dict(
        hop_docs=(3, 5), hop_weight=(0.05, 0.1, 0.15), hop_widens=(False,)
    ),
    "links: rare words shared with the first hits": dict(
        link_docs=(3, 5), link_weight=(0.1, 0.3), link_names=(False, True)
    ),
    "labels: the query names the turn's speaker": dict(label_weight=(0.05, 0.1, 0.2, 0.3)),
    "questions: rank lower, lend the next memory more": dict(
        ask_kind=("only", "short"), ask_penalty=(0.3, 0.6), ask_lend=(0.1, 0.2)
    ),
    "questions, with lexical feedback": dict(
        ask_kind=("only",),
        ask_penalty=(0.3, 0.6),
        ask_lend=(0.1, 0.2),
        lend_docs=(5,),
        lend_weight=(0.2,),
    ),
    "questions, with a second hop": dict(
        ask_kind=("short",),
        ask_penalty=(0.3, 0.6),
        ask_lend=(0.1, 0.2),
        hop_docs=(3,),
        hop_weight=(0.1,),
    ),
    "sessions: a lead from the memory's session": dict(
        session_kind=("max", "top2", "cos"), session_weight=(0.05, 0.1, 0.2, 0.4)
    ),
    "variety: a cost per hit from the same session": dict(session_penalty=(0.05, 0.1, 0.2)),
    "variety: maximal marginal relevance": dict(mmr=(0.05, 0.1, 0.2)),
    "query vector: tokens weighted by their IDF in the store": dict(query_idf=(0.5, 1.0, 2.0)),
    "query vector: without its stop words, or its hedges too": dict(
        query_strip=("stop", "hedge"), query_idf=(0.0, 0.5)
    ),
    "query vector: without the tokens most of the store holds": dict(query_drop=(0.05, 0.1, 0.2)),
    "the table's neighbours of the query's words (a second BM25 query)": dict(
        near_similarity=(0.6, 0.7), near_weight=(0.1, 0.2, 0.3)
    ),
    "vector context: a vector mixed with its neighbours' mean": dict(
        context_vector=(0.1, 0.2, 0.3), context_own=(0.0, 0.5)
    ),
    "a wider pool by cosine (x limit)": dict(pool=(6, 12, 100)),
    "memory vectors too: tokens weighted by their IDF in the store": dict(
        query_idf=(0.5, 1.0), memory_idf=(0.5, 1.0)
    ),
    "vectors less the store's mean": dict(centre=(0.5, 1.0), query_idf=(0.0, 0.5)),
    "query IDF, with questions and lexical feedback": {
        "query_idf": (0.5, 1.0),
        **_QUESTIONS_AND_FEEDBACK,
        "lend_docs": (0, 5),
    },
    "query IDF, questions and lexical feedback, a lighter or heavier feedback": {
        "query_idf": (0.25, 0.5),
        **_QUESTIONS_AND_FEEDBACK,
        "lend_weight": (0.2, 0.4),
    },
    "query IDF, questions and lexical feedback, the store's mean out": dict(
        query_idf=(0.5,),
        centre=(0.25, 0.5),
        memory_idf=(0.0, 0.5),
        **_QUESTIONS_AND_FEEDBACK,
    ),
    "query IDF, questions and lexical feedback, the table's neighbours": dict(
        query_idf=(0.5,),
        near_similarity=(0.6, 0.7),
        near_weight=(0.1,),
        **_QUESTIONS_AND_FEEDBACK,
    ),
    "store-adaptive vectors, questions, lexical feedback from the engine's ranking": dict(
        query_idf=(0.5,),
        memory_idf=(0.0, 0.5),
        centre=(0.0, 0.5),
        **_QUESTIONS_AND_FEEDBACK,
        lend_plain=(True,),
    ),
    "query IDF, questions and lexical feedback, sentence vectors": dict(
        query_idf=(0.5,),
        whole_share=(0.5, 0.7),
        **_QUESTIONS_AND_FEEDBACK,
    ),
    "store-adaptive vectors, with questions": dict(
        query_idf=(0.5,),
        memory_idf=(0.5,),
        centre=(0.25, 0.5),
        ask_kind=("only", "short"),
        ask_penalty=(0.3,),
        ask_lend=(0.2,),
    ),
    "query IDF, with questions and a second hop": dict(
        query_idf=(0.5, 1.0),
        ask_kind=("short",),
        ask_penalty=(0.3,),
        ask_lend=(0.2,),
        hop_docs=(0, 3),
        hop_weight=(0.1,),
    ),
}
