"""LongMemEval as a retrieval benchmark: does ``query(text=...)`` find the evidence turns?

It follows the paper's retrieval protocol (Wu et al., ICLR 2025). Each question
has its own haystack of about 50 chat sessions; one store per question holds
every user turn, stored at its session's date with the engine's injected
clock and in its session (``session=<the haystack session's id>``, as a host
capturing the chats would store them), and the question is asked at the
question's date. Gold turns are the
turns labelled ``has_answer``, gold sessions the sessions that hold them.

For each question it reports ``recall_all@k`` (every gold item is in the top
k) and ``recall_any@k`` (at least one is), for turns and for sessions, k = 5
and 10, overall and per question type. Sessions are ranked by their best turn,
in order, until k distinct sessions are in hand. A question whose gold holds
no user turn counts as recall 1, as in the paper, and is counted apart.

Systems compared in one run: BM25 alone, the default embedder alone, the
default hybrid, and, when sentence-transformers and a local MiniLM model are
available, MiniLM alone and in the hybrid. Embedding every haystack with a
transformer on a CPU is slow, so ``--cache DIR`` keeps its vectors on disk
between runs (keyed by the model and the text); without it they are computed.

``--loo`` tunes the default hybrid's weights leave-one-question-out: for each
question the best grid point on the other questions is scored on that one, so
no question is scored with weights tuned on it. ``--parts`` scores the default
hybrid with each part of its ranking off in turn (and two other cosine
weights), in sample, on stores built once (``engine.ranking`` set per variant).

The data is read from where it lies (default: ``../shared/datasets/longmemeval/
longmemeval-s-dev.json`` next to the repository) and never copied. ``--tiny``
runs on a few generated questions instead, for smoke tests. Run::

    python3 benchmarks/longmemeval_recall.py [--data PATH] [--cache DIR] [--loo] [--parts]
        [--json OUT]

The last line printed is the default hybrid's overall turn and session recall.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import _harness as harness
import locomo_recall
from _shared import REPO_ROOT, Clock

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.recall.embeddings import Embedder

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "datasets" / "longmemeval" / "longmemeval-s-dev.json"
KS = (5, 10)
#: Turns asked for per query: enough to reach k distinct sessions.
DEPTH = 100
#: The headline metrics: turn recall_all@10 and session recall_all@5.
HEADLINE = (("turn", "all", 10), ("session", "all", 5))
#: Weights tried by --loo: (cosine weight, context weight).
GRID = tuple((cw, ctx) for cw in (0.4, 0.5, 0.6, 0.7, 0.8) for ctx in (0.0, 0.3, 0.5, 0.6, 0.9))

Key = tuple[str, int]  # (session id, turn index)


@dataclass
class Session:
    session_id: str
    when: float
    turns: list[tuple[int, str]]  # (index, content)


@dataclass
class Question:
    question_id: str
    kind: str
    text: str
    when: float
    sessions: list[Session]
    gold_turns: frozenset[Key] = field(default_factory=frozenset)
    gold_sessions: frozenset[str] = field(default_factory=frozenset)


def parse_date(text: str) -> float:
    """``"2023/05/20 (Sat) 02:21"`` as Unix seconds (UTC)."""
    moment = datetime.strptime(text.strip(), "%Y/%m/%d (%a) %H:%M")
    return moment.replace(tzinfo=timezone.utc).timestamp()


def parse(items: list[dict[str, Any]]) -> list[Question]:
    """Questions from the LongMemEval JSON list (user turns only)."""
    questions = []
    for item in items:
        sessions = []
        gold: set[Key] = set()
        for raw in item["sessions"]:
            sid = str(raw["session_id"])
            turns = [(int(t["index"]), str(t["content"])) for t in raw["user_turns"]]
            gold.update((sid, int(t["index"])) for t in raw["user_turns"] if t["has_answer"])
            sessions.append(Session(sid, parse_date(raw["date"]), turns))
        sessions.sort(key=lambda s: s.when)  # stable: same-date sessions keep their order
        questions.append(
            Question(
                str(item["question_id"]),
                str(item["question_type"]),
                str(item["question"]),
                parse_date(item["question_date"]),
                sessions,
                frozenset(gold),
                frozenset(sid for sid, _ in gold),
            )
        )
    return questions


def tiny(seed: int = 7) -> list[dict[str, Any]]:
    """A few generated questions in LongMemEval's format, for smoke tests."""
    rng = random.Random(seed)
    topics = ["garden", "marathon", "guitar", "kitchen", "passport", "laptop", "puppy", "novel"]
    filler = "Can you suggest a few ideas about {} for this weekend, something simple and cheap?"
    items = []
    for q, topic in enumerate(topics[:4]):
        sessions = []
        for s in range(6):
            turns = [
                {"index": 2 * t, "content": filler.format(rng.choice(topics)), "has_answer": False}
                for t in range(3)
            ]
            if s == 2:
                turns[1] = {
                    "index": 2,
                    "content": f"By the way, I finally finished the {topic} project last Tuesday.",
                    "has_answer": True,
                }
            sessions.append(
                {"session_id": f"s{q}_{s}", "date": f"2023/05/{10 + s:02d} (Wed) 1{s}:00",
                 "user_turns": turns}
            )  # fmt: skip
        items.append(
            {
                "question_id": f"tiny{q}",
                "question_type": "single-session-user" if q % 2 else "multi-session",
                "question": f"When did I finish the {topic} project?",
                "answer": "last Tuesday",
                "question_date": "2023/06/01 (Thu) 09:00",
                "sessions": sessions,
            }
        )
    return items


class CachedEmbedder:
    """Another embedder's vectors, kept in a file per model so a rerun need not embed again.

    The file maps the SHA-256 of each text to its vector; it is read once and
    written back after every call that had to embed something new.
    """

    def __init__(self, inner: Embedder, folder: Path) -> None:
        import numpy as np

        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        folder.mkdir(parents=True, exist_ok=True)
        tag = hashlib.sha256(inner.name.encode()).hexdigest()[:16]
        self.path = folder / f"vectors-{tag}.npz"
        self._vectors: dict[str, Any] = {}
        if self.path.is_file():
            with np.load(self.path) as saved:
                self._vectors = dict(zip(saved["keys"].tolist(), saved["vectors"]))

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._vectors))
        if missing:
            text_of = dict(zip(keys, texts))
            fresh = self.inner.embed([text_of[k] for k in missing])
            self._vectors.update(zip(missing, fresh))
            np.savez(
                self.path,
                keys=np.array(list(self._vectors)),
                vectors=np.stack(list(self._vectors.values())).astype(np.float32),
            )
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = self._vectors[key]
        return out


def warm(embedder: Embedder, questions: list[Question], quiet: bool, batch: int = 256) -> None:
    """Embed every text once up front (so a cache fills), with progress."""
    texts = list(
        dict.fromkeys(
            [t for q in questions for s in q.sessions for _, t in s.turns if t.strip()]
            + [q.text for q in questions]
        )
    )
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        embedder.embed(texts[start : start + batch])
        if not quiet:
            done = min(start + batch, len(texts))
            rate = done / max(time.perf_counter() - started, 1e-9)
            print(f"\r  embedding {done:,}/{len(texts):,} ({rate:,.0f}/s)", end="", file=sys.stderr)
    if not quiet:
        print(file=sys.stderr)


def build(
    question: Question, embedder: str | Embedder, ranking: RankingSettings | None = None
) -> tuple[MemoryEngine, dict[str, list[Key]]]:
    """A fresh in-memory store of the question's user turns, and record id -> turn keys;
    each haystack session's turns in one batch at its date, with its id as the session."""
    clock = Clock()
    engine = MemoryEngine(":memory:", clock=clock, embedder=embedder, ranking=ranking)
    keys_of: dict[str, list[Key]] = {}
    for session in question.sessions:
        turns = [(i, t) for i, t in session.turns if t.strip()]
        if not turns:
            continue
        clock.now = session.when
        records = engine.store_many(
            [{"content": text, "session": session.session_id} for _, text in turns]
        )
        for (index, _), rec in zip(turns, records):
            keys_of.setdefault(rec.record_id, []).append((session.session_id, index))
    clock.now = question.when
    return engine, keys_of


Ranker = Callable[[MemoryEngine, str], list[str]]


def by_text(engine: MemoryEngine, question: str) -> list[str]:
    return [hit.record.record_id for hit in engine.query(text=question, limit=DEPTH)]


def by_vector(embedder: Embedder) -> Ranker:
    def rank(engine: MemoryEngine, question: str) -> list[str]:
        vector = embedder.embed([question])[0]
        if not vector.any():
            return []
        return [hit.record.record_id for hit in engine.query(vector=vector, limit=DEPTH)]

    return rank


Scores = dict[str, float]  # "turn all@10" -> 0 or 1


def score(question: Question, ranked: list[Key]) -> Scores:
    """Turn and session recall_all / recall_any at each k for one ranked list of turns."""
    sessions: list[str] = []
    for sid, _ in ranked:
        if sid not in sessions:
            sessions.append(sid)
    out: Scores = {}
    for level, gold, items in (
        ("turn", question.gold_turns, ranked),
        ("session", question.gold_sessions, sessions),
    ):
        for k in KS:
            top = set(items[:k])
            if not gold:
                out[f"{level} all@{k}"] = out[f"{level} any@{k}"] = 1.0
            else:
                out[f"{level} all@{k}"] = float(gold <= top)
                out[f"{level} any@{k}"] = float(bool(gold & top))
    return out


def metrics() -> list[str]:
    return [f"{level} {kind}@{k}" for level in ("turn", "session") for kind in ("all", "any")
            for k in KS]  # fmt: skip


def evaluate(
    engine: MemoryEngine, keys_of: dict[str, list[Key]], question: Question, rank: Ranker
) -> Scores:
    ranked: list[Key] = []
    for rid in rank(engine, question.text):
        ranked.extend(keys_of.get(rid, ()))
    return score(question, ranked)


def summarise(rows: list[tuple[Question, Scores]]) -> dict[str, dict[str, float]]:
    """Mean of every metric in percent, overall and per question type."""
    groups: dict[str, list[Scores]] = {"overall": [s for _, s in rows]}
    for q, s in rows:
        groups.setdefault(q.kind, []).append(s)
    table: dict[str, dict[str, float]] = {}
    for name, group in groups.items():
        table[name] = {m: 100 * sum(s[m] for s in group) / len(group) for m in metrics()}
        table[name]["n"] = len(group)
    return table


def paired(ours: list[Scores], theirs: list[Scores], metric: str) -> tuple[int, int]:
    """Questions where only ours, and only theirs, scores on ``metric``."""
    wins = sum(1 for a, b in zip(ours, theirs) if a[metric] > b[metric])
    losses = sum(1 for a, b in zip(ours, theirs) if a[metric] < b[metric])
    return wins, losses


def run_system(
    questions: list[Question],
    embedder: str | Embedder,
    rank: Ranker,
    ranking: RankingSettings | None = None,
) -> list[Scores]:
    rows = []
    for q in questions:
        engine, keys_of = build(q, embedder, ranking)
        with engine:
            rows.append(evaluate(engine, keys_of, q, rank))
    return rows


def with_settings(
    questions: list[Question], grid: Sequence[RankingSettings], quiet: bool, label: str
) -> list[list[Scores]]:
    """Per grid point, every question's scores with its store ranking by those settings;
    each store is built once (``engine.ranking`` set per point)."""
    found: list[list[Scores]] = [[] for _ in grid]
    for n, q in enumerate(questions):
        engine, keys_of = build(q, "builtin")
        with engine:
            for rows, settings in zip(found, grid):
                engine.ranking = settings
                rows.append(evaluate(engine, keys_of, q, by_text))
        if not quiet:
            print(f"\r  {label}: {n + 1}/{len(questions)}", end="", file=sys.stderr)
    if not quiet:
        print(file=sys.stderr)
    return found


def leave_one_out(questions: list[Question], quiet: bool) -> dict[str, Any]:
    """Tune (cosine, context) on all questions but one; score the one left out."""
    settings = [RankingSettings(cosine_weight=cw, context_weight=ctx) for cw, ctx in GRID]
    grid = dict(zip(GRID, with_settings(questions, settings, quiet, "loo grid")))

    def objective(weights: tuple[float, float], skip: int) -> float:
        rows = [s for i, s in enumerate(grid[weights]) if i != skip]
        return sum(s["turn all@10"] + s["session all@5"] for s in rows)

    held: list[tuple[Question, Scores]] = []
    chosen: dict[str, int] = {}
    for i, q in enumerate(questions):
        best = max(GRID, key=lambda w: objective(w, i))
        chosen[str(best)] = chosen.get(str(best), 0) + 1
        held.append((q, grid[best][i]))
    return {
        "held_out": summarise(held)["overall"],
        "weights_chosen": chosen,
        "grid": {str(w): summarise(list(zip(questions, grid[w])))["overall"] for w in GRID},
    }


def ablation(questions: list[Question], quiet: bool) -> dict[str, dict[str, float]]:
    """In sample: the defaults, and the defaults with each part of ``locomo_recall.ABLATION``
    changed; variant name -> overall summary."""
    variants = locomo_recall.ABLATION
    grid = [RankingSettings().but(**changes) for _, changes in variants]
    found = with_settings(questions, grid, quiet, "parts")
    return {
        name: summarise(list(zip(questions, rows)))["overall"]
        for (name, _), rows in zip(variants, found)
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LongMemEval JSON file")
    parser.add_argument("--tiny", action="store_true", help="a few generated questions instead")
    parser.add_argument("--questions", type=int, help="only the first N questions")
    parser.add_argument("--st-model", help="a sentence-transformers folder or cached name")
    parser.add_argument("--no-st", action="store_true", help="skip the MiniLM comparison")
    parser.add_argument("--cache", type=Path, help="keep MiniLM's vectors in this folder")
    parser.add_argument("--loo", action="store_true", help="leave-one-question-out tuning")
    parser.add_argument(
        "--parts",
        action="store_true",
        help="in sample, the defaults and the defaults with each part of the ranking off",
    )
    args = parser.parse_args(argv)

    if args.tiny:
        items = tiny()
        source = "generated (--tiny)"
    else:
        if not args.data.is_file():
            parser.error(f"no LongMemEval file at {args.data}; give one with --data")
        items = json.loads(args.data.read_text(encoding="utf-8"))
        source = str(args.data)
    questions = parse(items)[: args.questions]
    empty = sum(1 for q in questions if not q.gold_turns)
    turns = sum(len(s.turns) for q in questions for s in q.sessions)
    print(
        f"{len(questions)} questions, {turns:,} user turns "
        f"({empty} questions whose gold holds no user turn count as recall 1)"
    )

    minilm = None if args.no_st else locomo_recall.sentence_transformer(args.st_model)
    if minilm is not None:
        if args.cache:
            minilm = CachedEmbedder(minilm, args.cache)
        warm(minilm, questions, args.quiet)
    log = harness.Log(args.quiet)

    results: dict[str, Any] = {"data": source, "questions": len(questions), "systems": {}}
    per_question: dict[str, list[Scores]] = {}
    for name, embedder, rank in locomo_recall.systems(by_text, by_vector, minilm):
        started = time.perf_counter()
        rows = run_system(questions, embedder, rank)
        per_question[name] = rows
        results["systems"][name] = summarise(list(zip(questions, rows)))
        log(f"  {name}: {time.perf_counter() - started:.1f} s")

    shown = metrics()
    table_rows: list[list[object]] = []
    for name, table in results["systems"].items():
        table_rows += [
            [name, group, int(row["n"]), *(f"{row[m]:.1f}" for m in shown)]
            for group, row in table.items()
        ]
        table_rows.append([])  # an empty line after each system
    header = ["system", "group", "n", *(m.replace("session", "sess") for m in shown)]
    print(harness.text_table(header, table_rows, left=2))

    default = results["systems"]["hybrid (default)"]["overall"]
    if minilm is not None:
        print("default hybrid against MiniLM (headline metrics, same run):")
        ok = True
        results["paired"] = {}
        for level, kind, k in HEADLINE:
            metric = f"{level} {kind}@{k}"
            ours = default[metric]
            for other in ("minilm", "hybrid minilm"):
                theirs = results["systems"][other]["overall"][metric]
                ok = ok and ours >= theirs
                wins, losses = paired(per_question["hybrid (default)"], per_question[other], metric)
                results["paired"][f"{metric} vs {other}"] = {"wins": wins, "losses": losses}
                print(
                    f"  {metric}: default hybrid {ours:.1f}, {other} {theirs:.1f} "
                    f"(questions only the default gets: {wins}, only {other}: {losses})"
                )
        print(f"  {'at least as good on both' if ok else 'behind on at least one'}")
        results["at_least_minilm"] = ok

    if args.loo:
        loo = leave_one_out(questions, args.quiet)
        results["leave_one_out"] = loo
        held = loo["held_out"]
        print("leave-one-question-out (cosine, context weights; tuned on the headline metrics):")
        print(f"  weights chosen: {loo['weights_chosen']}")
        print("  held-out " + " ".join(f"{m}={held[m]:.1f}" for m in shown))
        print()

    if args.parts:
        started = time.perf_counter()
        parts = ablation(questions, args.quiet)
        results["parts"] = parts
        log(f"  --parts: {time.perf_counter() - started:.1f} s")
        print("one part at a time, in sample (stores built once):")
        print(f"{'':<42}{'turn all@10':>14}{'session all@5':>16}")
        for name, row in parts.items():
            print(f"{name:<42}{row['turn all@10']:14.1f}{row['session all@5']:16.1f}")
        print()

    harness.write_json(args.json, results)
    print(
        "overall " + " ".join(f"{level} {kind}@{k}={default[f'{level} {kind}@{k}']:.1f}"
                              for level, kind, k in HEADLINE)
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
