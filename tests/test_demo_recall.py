"""Recall over the demo's memories, with the embedder a user gets.

``prime-memory demo`` stores the package's example memories
(prime_memory_folding/data/demo_memories.json, read by the command's own
loader) and asks them a question. Here an agent's questions, worded unlike
the memories that answer them, must find those memories near the top. Each
answer is found in the demo data by a phrase only it holds, so the test
follows the data as it changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from prime_memory_folding import MemoryEngine
from prime_memory_folding.cli.setup import demo_memories, store_demo
from prime_memory_folding.core.records import Hit
from prime_memory_folding.recall.embeddings import EMBEDDER_ENV
from prime_memory_folding.recall.text_embedding import BUILTIN_SPACE
from tests.conftest import FakeClock


@dataclass(frozen=True)
class Question:
    text: str
    #: A phrase that only the memories answering the question hold.
    answer: str
    #: The answer ranks this high or higher.
    within: int = 1


QUESTIONS = [
    Question("what command runs the unit tests?", "make test`"),
    Question("how do I publish a new version of the package?", "Release:"),
    Question(
        "which storage did we pick so that several agents can read while another writes?",
        "WAL mode",
    ),
    # The bug fix about rounding invoice totals is as good an answer, and ranks first.
    Question("where does the code that rounds prices live?", "services/billing.py", within=3),
    Question("what happens if we change the secret used for signing?", "SECRET_KEY"),
    Question("which port does the development server listen on?", "uvicorn"),
    Question("why was the dashboard slow?", "N+1"),
    Question("how does the user like git commit messages written?", "imperative"),
    Question("can feature toggles change while the app is running?", "flags.toml"),
    Question("why is one of the tests intermittently failing?", "test_webhook_retry"),
    # The flaky webhook test and the invoices task rank above it.
    Question("how long can the delay between retries get?", "backoff", within=3),
    # The demo holds three wordings of this one; any of them answers.
    Question("what should I check before pushing?", "make lint"),
]


@dataclass(frozen=True)
class Answers:
    space: str | None
    hits: dict[str, list[Hit]]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Answers:
    """The demo's memories, stored as the demo stores them, and each question's hits.

    ``PRIME_MEMORY_EMBEDDER`` is unset and the engine takes no ``embedder=``,
    so it embeds with the bundled model, as on a fresh install. Each memory is
    stored ``age_days`` before the questions are asked, as in the demo.
    """
    clock = FakeClock()
    start = clock.now
    with pytest.MonkeyPatch.context() as env:
        env.delenv(EMBEDDER_ENV, raising=False)
        env.setenv("PRIME_MEMORY_HOME", str(tmp_path_factory.mktemp("home")))
        env.setenv("PRIME_MEMORY_SCOPE", "global")
        env.delenv("CLAUDE_PROJECT_DIR", raising=False)
        store = tmp_path_factory.mktemp("demo") / "memory.db"
        with MemoryEngine(store, clock=clock) as memory:
            store_demo(memory, demo_memories(), lambda at: setattr(clock, "now", at), start)
            hits = {q.text: memory.query(text=q.text, limit=10) for q in QUESTIONS}
            return Answers(memory.stats().embedding_space, hits)


def answers_of(question: Question) -> set[str]:
    """The demo memories that hold the question's phrase."""
    found = {item["content"] for item in demo_memories() if question.answer in item["content"]}
    assert found, f"no demo memory holds {question.answer!r}; the demo data changed"
    return found


def test_the_demo_store_ranks_with_the_bundled_model(answers: Answers) -> None:
    assert answers.space == BUILTIN_SPACE
    for hits in answers.hits.values():
        assert hits
        assert all("cosine" in hit.score_parts for hit in hits)


def test_each_phrase_names_one_memory_or_its_wordings() -> None:
    """A phrase naming several memories would let a wrong one pass."""
    for question in QUESTIONS:
        found = answers_of(question)
        assert len(found) == 1 or question.answer == "make lint", (question.answer, found)


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.text)
def test_the_answer_ranks_near_the_top(answers: Answers, question: Question) -> None:
    found = [hit.record.content for hit in answers.hits[question.text]]
    expected = answers_of(question)
    rank = next((i for i, content in enumerate(found, 1) if content in expected), None)
    assert rank is not None and rank <= question.within, (rank, found[: question.within])
