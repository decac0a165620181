"""Supersession: does ``restate.change`` find the memories a newer one restates with another value?

Three measures, in one run:

1. **Pairs.** ``benchmarks/supersession_cases.json`` holds pairs of notes as a
   coding agent writes them, an older and a newer one of one project: pairs
   where the newer changes a value of the older (a version bump, a rename, a
   reversed decision, a number), written from changes that happened in public
   projects and their tools, and related pairs that change nothing
   (elaboration, the same value, another topic). Split ``design``: the rules
   were tuned on them; ``held-out``: written after, not tuned on. It reports
   precision and recall of ``change(old, new)`` on each split, recall per
   kind, and the time of one call.
2. **In an engine.** Two stores on a temporary folder, one of the changing
   pairs and one of the others (an unchanging pair often restates a changing
   pair's newer value), each project its own scope (``project:<name>``):
   every older note is stored, then every newer one, each followed by what
   the engine does at store time: its top 5 text hits in its scope (itself
   left out) are the candidates, and ``change`` runs on each. Detection: a
   changing pair's older note is a candidate and is flagged. False alarms:
   every other flagged candidate. Beside it, what the engine's own check
   (``engine.possibly_supersedes(id)``) says of each new note, right and wrong.
3. **LongMemEval knowledge-update.** For each ``knowledge-update`` question of
   the data set (``--data``; loaded with ``longmemeval_recall``'s functions),
   the haystack's user turns are stored one by one at their session's date,
   in their session; the question is asked at its date. Score: the first hit
   is a turn with the current value (a gold turn of the latest answer
   session). (a) plain; (b) with supersession: before each turn is stored, its
   top 5 text hits are the candidates, and each one ``change`` flags is
   closed: ``store(..., supersedes=id)`` when the engine's ``store`` takes
   ``supersedes``, else ``archive([id], detail="superseded")`` (the engine's
   own suggestions are off there: the replay makes them itself, and queries a
   turn over a text query's limits with its first words). It also counts the
   older answer turns among the newer one's candidates, and those closed. The
   dev split holds few such questions (17 of 100): one is 6 points.

Run from the repository root::

    python3 benchmarks/supersession.py [--data PATH] [--lme-questions N] [--no-lme] [--json OUT]
"""

from __future__ import annotations

import inspect
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _harness as harness
import longmemeval_recall as lme
from _shared import REPO_ROOT, Clock

from prime_memory_folding import MemoryEngine
from prime_memory_folding.core.scopes import normalise_scope
from prime_memory_folding.core.words import word_set
from prime_memory_folding.engine.reads import MAX_QUERY_CHARS, MAX_QUERY_WORDS, check_query_text
from prime_memory_folding.errors import InvalidInput
from prime_memory_folding.recall.restate import change

CASES = REPO_ROOT / "benchmarks" / "supersession_cases.json"
#: Candidates the engine offers at store time.
CANDIDATES = 5
#: Seconds between two stored notes of the engine measure.
STEP_S = 3600.0


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cases"]
    return cases


def ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


# -- 1. pairs ---------------------------------------------------------------------------


def score_pairs(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Precision and recall of ``change`` on each split, recall per kind, and its time."""
    rows = []
    times: list[float] = []
    for case in cases:
        started = time.perf_counter()
        said = change(case["old"], case["new"])
        times.append(time.perf_counter() - started)
        rows.append((case, said))
    out: dict[str, Any] = {"splits": {}, "kinds": {}, "misses": [], "false_alarms": []}
    for split in ("design", "held-out", "all"):
        chosen = [(c, s) for c, s in rows if split == "all" or c["split"] == split]
        tp = sum(1 for c, s in chosen if c["changes"] and s)
        fp = sum(1 for c, s in chosen if not c["changes"] and s)
        positives = sum(1 for c, _ in chosen if c["changes"])
        out["splits"][split] = {
            "changing": positives,
            "unchanging": len(chosen) - positives,
            "detected": tp,
            "false_alarms": fp,
            "precision": ratio(tp, tp + fp),
            "recall": ratio(tp, positives),
        }
    for case, said in rows:
        if case["changes"]:
            kind = out["kinds"].setdefault(case["kind"], {"pairs": 0, "detected": 0})
            kind["pairs"] += 1
            kind["detected"] += bool(said)
            if not said:
                out["misses"].append(case["id"])
        elif said:
            out["false_alarms"].append({"id": case["id"], "said": said})
    out["said"] = {case["id"]: said for case, said in rows}
    out["call_us"] = {
        "median": 1e6 * statistics.median(times),
        "max": 1e6 * max(times),
    }
    return out


# -- 2. in an engine ----------------------------------------------------------------------


def as_query(text: str) -> str:
    """``text`` cut to what a text query takes: its first words, within the engine's limits."""
    kept: list[str] = []
    seen: set[str] = set()
    for word in text.split():
        seen |= word_set(word)
        if len(seen) > MAX_QUERY_WORDS or len(" ".join([*kept, word])) > MAX_QUERY_CHARS:
            break
        kept.append(word)
    return " ".join(kept) or text[:MAX_QUERY_CHARS]


def candidates(
    engine: MemoryEngine, text: str, scope: str | None, itself: str | None = None
) -> list[Any]:
    """The engine's candidates for ``text``: its top text hits in ``scope``, ``itself`` left out."""
    scopes = None if scope is None else [scope]
    hits = engine.query(as_query(text), limit=CANDIDATES + 1, scopes=scopes)
    return [h for h in hits if h.record.record_id != itself][:CANDIDATES]


def in_engine(cases: Sequence[dict[str, Any]], folder: Path) -> dict[str, Any]:
    """The store-time check in two stores, one of the changing pairs and one of the others
    (an unchanging pair often restates a changing pair's newer value, which would change
    that pair's older note): in each, every older note, then every newer one, each
    followed by the check on its candidates."""
    flagged: list[dict[str, Any]] = []
    found = offered = own_found = own_false = 0
    for group in (True, False):
        chosen = [c for c in cases if c["changes"] is group]
        clock = Clock(1_700_000_000.0)
        old_ids: dict[str, str] = {}
        path = folder / f"memory-{'changing' if group else 'unchanging'}.db"
        with MemoryEngine(path, clock=clock, embedder="builtin") as engine:
            for case in chosen:
                clock.now += STEP_S
                scope = normalise_scope(f"project:{case['project']}")
                old_ids[case["id"]] = engine.store(case["old"], scope=scope).record_id
            for case in chosen:
                clock.now += STEP_S
                scope = normalise_scope(f"project:{case['project']}")
                record = engine.store(case["new"], scope=scope)
                hits = candidates(engine, case["new"], scope, record.record_id)
                target = old_ids[case["id"]] if group else None
                offered += target in [h.record.record_id for h in hits]
                for hint in engine.possibly_supersedes(record.record_id):
                    if hint.record.record_id == target:
                        own_found += 1
                    else:
                        own_false += 1
                for hit in hits:
                    said = change(hit.record.content, case["new"])
                    if said is None:
                        continue
                    right = hit.record.record_id == target
                    found += right
                    if not right:
                        flagged.append(
                            {"new": case["id"], "candidate": hit.record.content, "said": said}
                        )
    changing = sum(1 for c in cases if c["changes"])
    return {
        "notes": 2 * len(cases),
        "changing": changing,
        "old_in_candidates": offered,
        "detected": found,
        "detection_rate": ratio(found, changing),
        "false_alarms": len(flagged),
        "new_notes_with_false_alarm": len({f["new"] for f in flagged}),
        "precision": ratio(found, found + len(flagged)),
        "false_alarm_list": flagged,
        "engine_own": {"detected": own_found, "false_alarms": own_false},
    }


# -- 3. LongMemEval knowledge-update --------------------------------------------------------


def within_query_limits(text: str) -> bool:
    """Whether ``text`` as a whole passes a text query's limits, as the engine's own
    store-time check queries with a memory's whole content."""
    try:
        check_query_text(text)
    except InvalidInput:
        return False
    return True


def takes_supersedes() -> bool:
    """Whether ``MemoryEngine.store`` takes ``supersedes`` (the lead's API)."""
    return "supersedes" in inspect.signature(MemoryEngine.store).parameters


def current_turns(question: lme.Question) -> frozenset[lme.Key]:
    """The gold turns of the latest session that holds any: the current value."""
    if not question.gold_turns:
        return frozenset()
    when = {s.session_id: s.when for s in question.sessions}
    order = {s.session_id: n for n, s in enumerate(question.sessions)}
    latest = max(question.gold_sessions, key=lambda sid: (when[sid], order[sid]))
    return frozenset(key for key in question.gold_turns if key[0] == latest)


def replay(question: lme.Question, supersede: bool, api: bool) -> dict[str, Any]:
    """Store the haystack's user turns one by one at their dates; with ``supersede``,
    close what each turn's candidates ``change`` flags. The first hit, and what was closed."""
    clock = Clock()
    keys_of: dict[str, lme.Key] = {}
    closed: list[lme.Key] = []
    over = refused = 0
    current = current_turns(question)
    offered: set[lme.Key] = set()  # the candidates of the current value's turns
    with MemoryEngine(":memory:", clock=clock, embedder="builtin") as engine:
        for session in question.sessions:
            clock.now = session.when
            for index, text in session.turns:
                if not text.strip():
                    continue
                gone: list[str] = []
                over += not within_query_limits(text)
                if supersede:
                    hits = candidates(engine, text, None)
                    if (session.session_id, index) in current:
                        offered.update(keys_of[h.record.record_id] for h in hits)
                    for hit in hits:
                        if hit.record.record_id in keys_of and change(hit.record.content, text):
                            gone.append(hit.record.record_id)
                extra: dict[str, Any] = {"supersedes": gone[0]} if api and gone else {}
                try:
                    rec = engine.store(text, session=session.session_id, **extra)
                except InvalidInput:  # a text that comes back after it was superseded
                    extra = {}
                    refused += 1
                    rec = engine.store(text, session=session.session_id)
                keys_of.setdefault(rec.record_id, (session.session_id, index))
                rest = [g for g in gone[1 if extra else 0 :] if g != rec.record_id]
                if rest:
                    engine.archive(rest, detail="superseded")
                closed.extend(keys_of[g] for g in gone[:1] if extra)
                closed.extend(keys_of[g] for g in rest)
        clock.now = question.when
        hits = engine.query(question.text, limit=1)
    first = keys_of.get(hits[0].record.record_id) if hits else None
    stale_offered = len((question.gold_turns - current) & offered)
    return {
        "first": first,
        "closed": closed,
        "over_query_limits": over,
        "refused": refused,
        "stale_gold_offered": stale_offered,
    }


def knowledge_update(
    questions: Sequence[lme.Question], log: harness.Log, api: bool
) -> dict[str, Any]:
    rows = []
    for n, q in enumerate(questions):
        current = current_turns(q)
        stale = q.gold_turns - current
        row: dict[str, Any] = {"question_id": q.question_id, "question": q.text}
        for name, supersede in (("plain", False), ("superseded", True)):
            got = replay(q, supersede, api)
            row[name] = {
                "current_first": got["first"] in current,
                "stale_first": got["first"] in stale,
                "closed": len(got["closed"]),
                "stale_gold_closed": len(stale & set(got["closed"])),
                "current_gold_closed": len(current & set(got["closed"])),
                "supersedes_refused": got["refused"],
                "stale_gold_offered": got["stale_gold_offered"],
            }
        row["turns"] = sum(1 for s in q.sessions for _, t in s.turns if t.strip())
        row["over_query_limits"] = got["over_query_limits"]
        rows.append(row)
        log(f"  knowledge-update {n + 1}/{len(questions)}")
    out: dict[str, Any] = {
        "questions": len(rows),
        "turns": sum(r["turns"] for r in rows),
        "over_query_limits": sum(r["over_query_limits"] for r in rows),
        "per_question": rows,
    }
    for name in ("plain", "superseded"):
        out[name] = {
            "current_first": sum(r[name]["current_first"] for r in rows),
            "stale_first": sum(r[name]["stale_first"] for r in rows),
            "closed": sum(r[name]["closed"] for r in rows),
            "stale_gold_closed": sum(r[name]["stale_gold_closed"] for r in rows),
            "current_gold_closed": sum(r[name]["current_gold_closed"] for r in rows),
            "supersedes_refused": sum(r[name]["supersedes_refused"] for r in rows),
            "stale_gold_offered": sum(r[name]["stale_gold_offered"] for r in rows),
        }
    out["stale_gold"] = sum(len(q.gold_turns - current_turns(q)) for q in questions)
    return out


# -- the run ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = harness.parser(__doc__ or "")
    parser.add_argument("--cases", type=Path, default=CASES, help="the pairs' JSON file")
    parser.add_argument("--data", type=Path, default=lme.DEFAULT_DATA, help="LongMemEval JSON")
    parser.add_argument("--lme-questions", type=int, help="only the first N knowledge-update ones")
    parser.add_argument("--no-lme", action="store_true", help="skip LongMemEval")
    parser.add_argument("--pairs", type=int, help="only the first N pairs of each kind of pair")
    args = parser.parse_args(argv)
    log = harness.Log(args.quiet)
    cases = load_cases(args.cases)
    if args.pairs is not None:
        cases = [c for c in cases if c["changes"]][: args.pairs] + [
            c for c in cases if not c["changes"]
        ][: args.pairs]
    report: dict[str, Any] = {"conditions": harness.conditions(), "cases": str(args.cases)}

    pairs = score_pairs(cases)
    report["pairs"] = pairs
    print(f"supersession: {len(cases)} pairs; {harness.conditions_line(report['conditions'])}")
    rows = [
        [split, s["changing"], s["unchanging"], s["detected"], s["false_alarms"],
         pct(s["precision"]), pct(s["recall"])]
        for split, s in pairs["splits"].items()
    ]  # fmt: skip
    header = ["pairs", "changing", "unchanging", "detected", "false alarms", "precision", "recall"]
    print(harness.text_table(header, rows))
    kinds = ", ".join(f"{k} {v['detected']}/{v['pairs']}" for k, v in pairs["kinds"].items())
    print(f"recall by kind: {kinds}")
    call = pairs["call_us"]
    print(f"one call: median {call['median']:.0f} us, max {call['max']:.0f} us")

    with tempfile.TemporaryDirectory(prefix="pmf-supersede-") as tmp:
        started = time.perf_counter()
        engine = in_engine(cases, Path(tmp))
        log(f"  engine measure: {time.perf_counter() - started:.1f} s")
    report["engine"] = engine
    own = engine["engine_own"]
    print(
        f"in an engine ({engine['notes']} notes, top {CANDIDATES} candidates in the scope): "
        f"older note offered {engine['old_in_candidates']}/{engine['changing']}, detected "
        f"{engine['detected']}/{engine['changing']} ({pct(engine['detection_rate'])}); "
        f"false alarms {engine['false_alarms']} on {engine['new_notes_with_false_alarm']} "
        f"new notes (precision {pct(engine['precision'])}); the engine's own "
        f"possibly_supersedes: {own['detected']} right, {own['false_alarms']} false"
    )

    if args.no_lme:
        report["longmemeval"] = None
    elif not args.data.is_file():
        print(f"LongMemEval: no file at {args.data}; skipped")
        report["longmemeval"] = None
    else:
        items = json.loads(args.data.read_text(encoding="utf-8"))
        questions = [q for q in lme.parse(items) if q.kind == "knowledge-update"]
        questions = questions[: args.lme_questions]
        api = takes_supersedes()
        started = time.perf_counter()
        ku = knowledge_update(questions, log, api)
        ku["closing"] = "store(supersedes=...)" if api else 'archive(detail="superseded")'
        ku["seconds"] = time.perf_counter() - started
        report["longmemeval"] = ku
        n = ku["questions"]
        print(
            f"LongMemEval knowledge-update: {n} questions of {len(items)} in {args.data.name} "
            f"(closing by {ku['closing']}); {ku['over_query_limits']:,} of {ku['turns']:,} "
            "turns are over a text query's limits (they query with their first words, "
            "as the engine's own check does)"
        )
        rows = [
            [name, f"{s['current_first']}/{n}", f"{s['stale_first']}/{n}", s["closed"],
             s["stale_gold_closed"], s["current_gold_closed"]]
            for name, s in (("plain", ku["plain"]), ("with supersession", ku["superseded"]))
        ]  # fmt: skip
        print(
            harness.text_table(
                ["store", "first hit current", "first hit stale", "closed", "stale gold closed",
                 "current gold closed"],
                rows,
            )
        )  # fmt: skip
        sup = ku["superseded"]
        if n < 30:
            print(f"few questions: one of the {n} is {100 / max(n, 1):.1f} points")
        print(
            f"stale gold turns: {ku['stale_gold']}; among a current gold turn's "
            f"{CANDIDATES} candidates when it was stored: {sup['stale_gold_offered']}; "
            f"closed: {sup['stale_gold_closed']}"
        )
    harness.write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
