"""Screen ideas for text recall on LongMemEval and LoCoMo without changing the engine.

Trying an idea in the engine means a schema change (several vectors per
memory), a new bundled model, or new fusion code. This script tries them
first on a re-implementation of the engine's text ranking in numpy: the same
BM25 scores (read from the engine with embedding off), the same stored
vectors, the same fusion

    fused = (1 - cosine_weight) * bm25 / max(bm25) + cosine_weight * max(cosine, 0)
    final = fused + context_weight * (best fused score of a neighbour within 30 minutes)

(neighbours: the ``reach`` memories stored before it and after it)
over the same candidates (every lexical hit and the 3 x limit best by
cosine). Before any idea it checks that this re-implementation, at the
engine's own weights, gives the engine's own recall on both benchmarks
(``longmemeval_recall.py`` and ``locomo_recall.py``, default hybrid); if it
does not, it exits with status 1.

Ideas, each scored on LongMemEval (turn recall_all@10, session recall_all@5)
and LoCoMo (R@10):

- several vectors per memory: one per sentence, scored by the best sentence
  or by a mix of the whole text's cosine and the best sentence's;
- BM25 per sentence (best sentence, or a mix with the whole text's);
- BM25 length normalisation pushed up or down (``bm25 * (length / mean)^p``);
- other fusions: cosine over its maximum, reciprocal rank fusion, a wider or
  weaker neighbour context, pseudo-relevance feedback on the query vector;
- other static models, given as ``--model model2vec:<folder>``;
- the fusion weights with and without sentence vectors, tuned leave-one-out
  (per question on LongMemEval, per conversation on LoCoMo).

Run from the repository root::

    python3 benchmarks/recall_ideas.py [--model model2vec:/path ...] [--json OUT]

``--tiny`` runs on LongMemEval's generated questions alone, for smoke tests.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _harness as harness
import locomo_recall as locomo
import longmemeval_recall as lme
import numpy as np
import numpy.typing as npt

from prime_memory_folding import MemoryEngine, recall
from prime_memory_folding.embeddings import Embedder, load_embedder

Array = npt.NDArray[np.float64]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
#: A sentence this short joins the one before it.
MIN_SENTENCE_WORDS = 4
#: Allowed gap between this re-implementation's baseline and the engine's, in points.
TOLERANCE = 0.5


def sentences(text: str) -> list[str]:
    """``text`` cut after ``.``, ``!`` or ``?`` and at line breaks; short pieces rejoin."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if out and len(piece.split()) < MIN_SENTENCE_WORDS:
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out or [text]


def bm25(texts: Sequence[str], queries: Sequence[str]) -> list[Array]:
    """The engine's BM25 score of every text for every query (0 where it does not match)."""
    out = []
    with MemoryEngine(":memory:", embedder="none") as engine:
        records = engine.store_many([{"content": t} for t in texts])
        positions: dict[str, list[int]] = {}
        for i, rec in enumerate(records):  # equal texts share one record, as in the engine
            positions.setdefault(rec.record_id, []).append(i)
        for query in queries:
            scores = np.zeros(len(texts))
            for hit in engine.query(text=query, limit=10_000):
                scores[positions[hit.record.record_id]] = hit.score_parts["bm25"]
            out.append(scores)
    return out


@dataclass
class Haystack:
    """One store's texts, times and vectors, and its queries' scores."""

    texts: list[str]
    stamps: Array
    whole: Any
    queries: Any
    bm25: list[Array]
    owner: Any = None  # sentence -> text
    sentence_vectors: Any = None
    sentence_bm25: list[Array] = field(default_factory=list)

    @classmethod
    def build(
        cls, embedder: Embedder, texts: list[str], stamps: list[float], queries: list[str]
    ) -> Haystack:
        cut = [sentences(t) for t in texts]
        flat = [s for parts in cut for s in parts]
        return cls(
            texts=texts,
            stamps=np.array(stamps, dtype=np.float64),
            whole=embedder.embed(texts),
            queries=embedder.embed(queries),
            bm25=bm25(texts, queries),
            owner=np.repeat(np.arange(len(texts)), [len(parts) for parts in cut]),
            sentence_vectors=embedder.embed(flat),
            sentence_bm25=bm25(flat, queries),
        )

    def best_per_text(self, values: Array, floor: float) -> Array:
        best = np.full(len(self.texts), floor)
        np.maximum.at(best, self.owner, values)
        return best


@dataclass(frozen=True)
class Idea:
    """One way to rank; the defaults are the engine's."""

    cosine_weight: float = recall.COSINE_WEIGHT
    context_weight: float = recall.CONTEXT_WEIGHT
    whole_share: float = 1.0  # cosine: this share of the whole text's, the rest best sentence's
    lexical_whole_share: float = 1.0  # BM25 likewise
    length_power: float = 0.0
    cosine_over_max: bool = False
    rrf: int = 0  # reciprocal rank fusion constant; 0: score fusion
    window: int = recall.CONTEXT_REACH  # neighbours on each side that lend context
    feedback: int = 0  # pseudo-relevance feedback: the best this many lend the query their vector
    feedback_weight: float = 0.6


def _normalised(values: Array) -> Array:
    top = float(values.max()) if len(values) else 0.0
    return values / top if top > 0 else values


def rank(h: Haystack, q: int, idea: Idea, limit: int, query: Any = None) -> list[int]:
    """Indices of ``h.texts`` best first, at most ``limit``, as the engine would rank them."""
    n = len(h.texts)
    vector = h.queries[q] if query is None else query
    cosine = (h.whole @ vector).astype(np.float64)
    if idea.whole_share < 1.0:
        best = h.best_per_text((h.sentence_vectors @ vector).astype(np.float64), -1.0)
        cosine = idea.whole_share * cosine + (1 - idea.whole_share) * best
    cosine = np.maximum(cosine, 0.0)
    raw = h.bm25[q]
    if idea.length_power:
        words = np.array([max(len(t.split()), 1) for t in h.texts], dtype=np.float64)
        raw = raw * (words / words.mean()) ** idea.length_power
    lexical = _normalised(raw)
    if idea.lexical_whole_share < 1.0:
        best = _normalised(h.best_per_text(h.sentence_bm25[q], 0.0))
        lexical = idea.lexical_whole_share * lexical + (1 - idea.lexical_whole_share) * best
    if idea.cosine_over_max:
        cosine = _normalised(cosine)
    if idea.rrf:
        by_cosine = np.empty(n)
        by_cosine[np.argsort(-cosine, kind="stable")] = np.arange(n)
        by_lexical = np.empty(n)
        by_lexical[np.argsort(-lexical, kind="stable")] = np.arange(n)
        lexical = np.where(lexical > 0, idea.rrf / (idea.rrf + by_lexical), 0.0)
        cosine = idea.rrf / (idea.rrf + by_cosine)
    fused = (1 - idea.cosine_weight) * lexical + idea.cosine_weight * cosine
    # The engine's candidates: every lexical hit and the best by cosine.
    candidate = raw > 0
    spare = min(limit * (3 if idea.context_weight else 1), n)
    candidate[np.argsort(-cosine, kind="stable")[:spare]] = True
    context = np.zeros(n)
    for step in [s for w in range(1, idea.window + 1) for s in (-w, w)]:
        other = np.arange(n) + step
        ok = (other >= 0) & (other < n)
        other = np.clip(other, 0, n - 1)
        ok &= np.abs(h.stamps[other] - h.stamps) <= recall.SESSION_GAP_S
        context = np.maximum(context, np.where(ok, fused[other], 0.0))
    final = np.where(candidate, fused + idea.context_weight * context, -np.inf)
    order = np.argsort(-final, kind="stable")[:limit]
    order = order[np.isfinite(final[order]) & ((final[order] > 0) | (raw[order] > 0))]
    if idea.feedback and query is None:
        lent = h.whole[order[: idea.feedback]].mean(axis=0)
        moved = h.queries[q] + idea.feedback_weight * lent
        moved = moved / max(float(np.linalg.norm(moved)), 1e-12)
        return rank(h, q, idea, limit, moved)
    return [int(i) for i in order]


@dataclass
class Bench:
    lme: list[tuple[lme.Question, Haystack, list[lme.Key]]]
    locomo: list[tuple[locomo.Conversation, Haystack]]

    def lme_scores(self, idea: Idea) -> Array:
        """Per question: turn recall_all@10, session recall_all@5."""
        rows = []
        for question, h, keys in self.lme:
            scores = lme.score(question, [keys[i] for i in rank(h, 0, idea, lme.DEPTH)])
            rows.append((scores["turn all@10"], scores["session all@5"]))
        return np.array(rows, dtype=np.float64).reshape(-1, 2)

    def locomo_scores(self, idea: Idea) -> list[Array]:
        """Per conversation, per question: R@10 (turns are the memories, one dialog id each)."""
        out = []
        for conv, h in self.locomo:
            dia = [d for d, _, _ in conv.turns]
            row = []
            for q, question in enumerate(conv.questions):
                top = {dia[i] for i in rank(h, q, idea, max(locomo.KS))[:10]}
                row.append(len(question.gold & top) / len(question.gold))
            out.append(np.array(row))
        return out

    def measure(self, idea: Idea) -> dict[str, float]:
        lme_rows = self.lme_scores(idea)
        result = {
            "lme turn all@10": float(100 * lme_rows[:, 0].mean()) if len(lme_rows) else 0.0,
            "lme session all@5": float(100 * lme_rows[:, 1].mean()) if len(lme_rows) else 0.0,
        }
        if self.locomo:
            flat = np.concatenate(self.locomo_scores(idea))
            result["locomo R@10"] = float(100 * flat.mean())
        return result


def load(embedder: Embedder, lme_items: list[dict[str, Any]], locomo_path: Path | None) -> Bench:
    bench = Bench([], [])
    for question in lme.parse(lme_items):
        turns = [(s, i, t) for s in question.sessions for i, t in s.turns if t.strip()]
        texts = [t for _, _, t in turns]
        stamps = [s.when for s, _, _ in turns]
        h = Haystack.build(embedder, texts, stamps, [question.text])
        bench.lme.append((question, h, [(s.session_id, i) for s, i, _ in turns]))
    if locomo_path is not None:
        for conv in locomo.load(locomo_path):
            texts = [t for _, t, _ in conv.turns]
            stamps = [w for _, _, w in conv.turns]
            queries = [q.text for q in conv.questions]
            bench.locomo.append((conv, Haystack.build(embedder, texts, stamps, queries)))
    return bench


def engine_baseline(lme_items: list[dict[str, Any]], locomo_path: Path | None) -> dict[str, float]:
    """The engine's own default hybrid on the same data, through the benchmark scripts."""
    questions = lme.parse(lme_items)
    rows = lme.run_system(questions, "builtin", lme.by_text)
    result = {
        "lme turn all@10": 100 * sum(r["turn all@10"] for r in rows) / len(rows),
        "lme session all@5": 100 * sum(r["session all@5"] for r in rows) / len(rows),
    }
    if locomo_path is not None:
        found, _ = locomo.run_system(locomo.load(locomo_path), "builtin", locomo.by_text)
        result["locomo R@10"] = 100 * sum(r[10] for _, r in found) / len(found)
    return result


#: The fusion before these ideas: cosine 0.6, context 0.6 from one neighbour each side.
BEFORE: dict[str, Any] = {"cosine_weight": 0.6, "context_weight": 0.6, "window": 1}


def before(**changes: Any) -> Idea:
    """An idea on top of the fusion as it was before any of them."""
    return Idea(**{**BEFORE, **changes})


IDEAS: dict[str, Idea] = {
    "fusion before (cosine 0.6, context 0.6, reach 1)": before(),
    "embedder alone": before(cosine_weight=1.0, context_weight=0.0),
    "sentence vectors: best sentence": before(whole_share=0.0),
    "sentence vectors: 0.7 whole + 0.3 best": before(whole_share=0.7),
    "sentence vectors: 0.5 whole + 0.5 best": before(whole_share=0.5),
    "sentence vectors, embedder alone: 0.5 + 0.5": before(
        whole_share=0.5, cosine_weight=1.0, context_weight=0.0
    ),
    "sentence BM25: best sentence": before(lexical_whole_share=0.0),
    "sentence BM25: 0.5 whole + 0.5 best": before(lexical_whole_share=0.5),
    "BM25 x (length / mean)^-0.3": before(length_power=-0.3),
    "BM25 x (length / mean)^0.3": before(length_power=0.3),
    "cosine / max(cosine)": before(cosine_over_max=True),
    "reciprocal rank fusion, k = 10": before(rrf=10),
    "reciprocal rank fusion, k = 60": before(rrf=60),
    "context weight 0.3": before(context_weight=0.3),
    "context weight 0.45": before(context_weight=0.45),
    "cosine weight 0.7": before(cosine_weight=0.7),
    "query + 0.6 x mean of the best 3": before(feedback=3),
    "reach 2": before(window=2),
    "reach 3": before(window=3),
    "reach 2, cosine 0.7": before(window=2, cosine_weight=0.7),
    "reach 2, cosine 0.7, BM25 x (length / mean)^0.3": before(
        window=2, cosine_weight=0.7, length_power=0.3
    ),
    "reach 2, cosine 0.7, context 0.5 (the new default)": before(
        window=2, cosine_weight=0.7, context_weight=0.5
    ),
    "the engine's default now": Idea(),
}
#: Fusion weights for --loo: (cosine, context).
LOO_GRID = tuple(itertools.product((0.5, 0.6, 0.7, 0.8), (0.3, 0.45, 0.5, 0.6, 0.75)))


def leave_one_out(
    bench: Bench, shares: Sequence[float], reaches: Sequence[int]
) -> dict[str, float]:
    """Held-out recall when the weights (and sentence share, reach) are tuned on the rest."""
    ideas = [
        Idea(cosine_weight=cw, context_weight=ctx, whole_share=share, window=reach)
        for share in shares
        for reach in reaches
        for cw, ctx in LOO_GRID
    ]
    lme_rows = [bench.lme_scores(idea) for idea in ideas]
    held = [
        lme_rows[max(range(len(ideas)), key=lambda n: lme_rows[n].sum() - lme_rows[n][i].sum())][i]
        for i in range(len(bench.lme))
    ]
    result = {
        "lme turn all@10": float(100 * np.mean([h[0] for h in held])),
        "lme session all@5": float(100 * np.mean([h[1] for h in held])),
    }
    if bench.locomo:
        per_conv = [bench.locomo_scores(idea) for idea in ideas]

        def train(n: int, skip: int) -> float:
            rest = [x for k, x in enumerate(per_conv[n]) if k != skip]
            return float(np.concatenate(rest).mean())

        held_r10: list[float] = []
        for j in range(len(bench.locomo)):
            best = max(range(len(ideas)), key=lambda n: train(n, j))
            held_r10.extend(per_conv[best][j].tolist())
        result["locomo R@10"] = float(100 * np.mean(held_r10))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--lme", type=Path, default=lme.DEFAULT_DATA, help="LongMemEval JSON")
    parser.add_argument("--locomo", type=Path, default=locomo.DEFAULT_DATA, help="LoCoMo JSON")
    parser.add_argument("--tiny", action="store_true", help="generated LongMemEval questions only")
    parser.add_argument("--model", action="append", default=[], help="another static model spec")
    parser.add_argument("--loo", action="store_true", help="tune weights leave-one-out")
    args = parser.parse_args(argv)

    locomo_path: Path | None = None
    if args.tiny:
        lme_items = lme.tiny()
    else:
        for path, flag in ((args.lme, "--lme"), (args.locomo, "--locomo")):
            if not path.is_file():
                parser.error(f"no data at {path}; give it with {flag}")
        lme_items = json.loads(args.lme.read_text(encoding="utf-8"))
        locomo_path = args.locomo

    say = harness.Log(args.quiet)
    results: dict[str, Any] = {"ideas": {}, "models": {}}
    say("the engine's default hybrid")
    engine = engine_baseline(lme_items, locomo_path)
    say("embedding and BM25 for the re-implementation")
    bench = load(load_embedder("builtin"), lme_items, locomo_path)
    mine = bench.measure(Idea())
    results["agreement"] = {"engine": engine, "re-implementation": mine}
    print("agreement, default hybrid: " + ", ".join(
        f"{k} engine {engine[k]:.1f} / here {mine[k]:.1f}" for k in engine
    ))  # fmt: skip
    gaps = [
        f"{k}: a gap above {TOLERANCE} points"
        for k in engine
        if abs(mine[k] - engine[k]) > TOLERANCE
    ]
    if not harness.check(gaps, "agreement: OK", then="no idea was scored"):
        return 1

    def show(name: str, row: dict[str, float]) -> None:
        cells = "  ".join(f"{k} {v:5.1f}" for k, v in row.items())
        print(f"{name:<46} {cells}")

    for name, idea in IDEAS.items():
        row = bench.measure(idea)
        results["ideas"][name] = row
        show(name, row)
    for spec in args.model:
        say(f"model {spec}")
        other = load(load_embedder(spec), lme_items, locomo_path)
        for name, idea in (
            ("hybrid", Idea()),
            ("alone", Idea(cosine_weight=1.0, context_weight=0.0)),
        ):
            row = other.measure(idea)
            results["models"][f"{spec} {name}"] = row
            show(f"{spec} {name}", row)
    if args.loo:
        say("leave-one-out tuning")
        for label, shares, reaches in (
            ("weights, reach 1", (1.0,), (1,)),
            ("weights, reach 1 or 2", (1.0,), (1, 2)),
            ("weights, reach 1, sentence vectors", (1.0, 0.7, 0.5), (1,)),
            ("weights, reach 1 or 2, sentence vectors", (1.0, 0.7, 0.5), (1, 2)),
        ):
            row = leave_one_out(bench, shares, reaches)
            results.setdefault("leave_one_out", {})[label] = row
            show(f"held out, tuned: {label}", row)
    harness.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
