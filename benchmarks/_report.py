"""The report of ``run_all.py``: machine facts, targets, Markdown tables and charts."""

from __future__ import annotations

import importlib
import os
import platform
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _harness as harness
from _harness import fmt_ms as ms
from _harness import markdown_table as table

#: Published DRAGON retrieval on LoCoMo (dialog-turn evidence), for comparison. It was
#: measured on all ten conversations, while ``locomo_recall.py`` runs on the data it is
#: given (by default the development split, five of them), so it is labelled apart.
DRAGON = {"R@5": 56.7, "R@10": 66.2, "R@25": 76.7, "R@50": 82.7}
DRAGON_LABEL = "DRAGON (published; all 10 conversations)"
KS = ("R@5", "R@10", "R@25", "R@50")
TARGET_RECORDS = 100_000
_NO_TIMINGS = "No timings: no size passed its check.\n"


# -- machine --------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    ram = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
    except OSError:
        pass
    import numpy

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_bytes": ram,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "sqlite": sqlite3.sqlite_version,
        **{f"{key}_before": value for key, value in harness.conditions().items()},
    }


def machine_line(results: dict[str, Any]) -> str:
    m = results["machine"]
    ram = f"{m['ram_bytes'] / 2**30:.0f} GiB RAM" if m.get("ram_bytes") else "RAM unknown"
    return f"{m['cpu']}, {m['cores']} cores, {ram}; {results['date'][:10]}"


# -- helpers ----------------------------------------------------------------------------


def section_failed(section: Any) -> bool:
    return isinstance(section, dict) and "failed" in section


def problems(section: Any, where: str = "") -> list[str]:
    """Every failed check inside a section, each with where it happened.

    A check fails where a mapping has a ``failed`` key (a script that exited
    with an error, such as a disagreement), an ``agreement`` that is False (a
    size whose systems disagreed), or an ``ok`` that is False (a soak's check).
    """
    found: list[str] = []
    at = f"{where}: " if where else ""
    if isinstance(section, dict):
        if "failed" in section:
            found.append(f"{at}{section['failed']}")
        if section.get("agreement") is False:
            found.append(f"{at}the systems compared disagree")
        if section.get("ok") is False:
            found.append(f"{at}its check failed")
        for key, value in section.items():
            found += problems(value, f"{where}, {key}" if where else str(key))
    elif isinstance(section, list):
        for i, item in enumerate(section):
            label = (
                f"{item['records']:,} records"
                if isinstance(item, dict) and "records" in item
                else str(i)
            )
            found += problems(item, f"{where}, {label}" if where else label)
    return found


def disagreements(results: dict[str, Any]) -> list[str]:
    """Every failed check in the run, as ``section: where: what``."""
    found = []
    for name, section in results["sections"].items():
        found += [f"{name}: {p}" for p in problems(section)]
        if name == "soak":  # a soak script must say that its check passed
            found += [
                f"soak: {script}: no check result"
                for script, r in section.items()
                if isinstance(r, dict) and "ok" not in r and "failed" not in r
            ]
    return found


def failure(section: dict[str, Any]) -> str:
    out = f"**FAILED**: {section['failed']}\n"
    if section.get("output"):
        out += "\n```\n" + "\n".join(section["output"]) + "\n```\n"
    return out


def at_size(runs: list[dict[str, Any]], size: int) -> tuple[dict[str, Any] | None, bool]:
    """The run at ``size``, else the largest; and whether it was the one wanted."""
    if not runs:
        return None, False
    exact = next((r for r in runs if r["records"] == size), None)
    return (exact, True) if exact else (max(runs, key=lambda r: r["records"]), False)


# -- targets ----------------------------------------------------------------------------


#: What a target's judge finds in its part of the results: the figure measured, where,
#: whether it passed (None: it could not be judged) and a note; None: nothing to judge.
Judged = tuple[str | None, str, bool | None, str] | None


def _at(count: int, unit: str, exact: bool) -> str:
    return f"{count:,} {unit}" + ("" if exact else " (indicative)")


def _structure_target(s: dict[str, Any]) -> Judged:
    run, exact = at_size([r for r in s["runs"] if "kinds" in r], TARGET_RECORDS)
    if not run:
        return None
    ratios = {k: run["kinds"][k]["ratio_vs_engine"]["sqlite sql"] for k in ("tags (2)", "tags (3)")}
    shown = ", ".join(f"{k} {v:.1f}x" for k, v in ratios.items())
    return shown, _at(run["records"], "records", exact), all(v >= 10 for v in ratios.values()), ""


def _vector_target(v: dict[str, Any]) -> Judged:
    run, exact = at_size(v["sizes"], TARGET_RECORDS)
    if not run:
        return None
    ratio = run["ratio_vs_floor"]["engine"]
    return f"{ratio:.2f}x", _at(run["records"], "vectors", exact), ratio <= 1.5, ""


def _mcp_store_target(m: dict[str, Any]) -> Judged:
    if not m["sizes"]:
        return None
    ours = m["sizes"][-1]["systems"]["prime-memory-mcp"]["stores"]
    floor = m.get("sdk_floor", {}).get("p50")
    note = f"the SDK's trivial-tool floor on this machine is {ms(floor)}" if floor else ""
    return ms(ours["p50"]), f"{ours['calls']:,} stores over stdio", ours["p50"] <= 0.002, note


def _peer_target(m: dict[str, Any]) -> Judged:
    if not m["sizes"]:
        return None
    rows = [row for row in m["sizes"] if "store_throughput_ratio" in row]
    if not rows:
        return None, "-", None, f"reference server unavailable: {m.get('peer_unavailable')}"
    row = next((x for x in rows if x["records"] == 20_000), rows[-1])
    capped = row["systems"]["server-memory (reference)"]["capped"]
    ratio = row["store_throughput_ratio"]
    at = f"N = {row['records']:,}" + ("" if row["records"] == 20_000 else " (indicative)")
    return f"{ratio:.1f}x", at, ratio >= 10, f"reference server capped: {capped}" if capped else ""


def _text_target(t: dict[str, Any]) -> Judged:
    at = _at(t["records"], "records", t["records"] == TARGET_RECORDS)
    return ms(t["p50"]), at, t["p50"] <= 0.015, ""


def _memory_target(t: dict[str, Any]) -> Judged:
    at = _at(t["records"], "records", t["records"] == TARGET_RECORDS)
    rss = t["max_rss_mb"]
    return f"{rss:,.0f} MB", at + ", peak of the text query run", rss <= 400, ""


def _tools_target(tl: dict[str, Any]) -> Judged:
    total, counters = tl["total"], list(tl["pass"])
    note = "" if "o200k_base" in counters else "bpe-openai not installed: the estimate alone"
    shown = ", ".join(f"{total[c]:,} by {c}" for c in counters)
    at = f"{len(tl['tools'])} tools, {total['bytes']:,} bytes"
    return shown, at, all(tl["pass"].values()), note


def _inspector_target(i: dict[str, Any]) -> Judged:
    worst = max(p50["page"] for p50 in i["p50_seconds"].values())
    at = _at(i["records"], "records", i["records"] == TARGET_RECORDS)
    return ms(worst) + " (slowest page)", at, worst <= 0.100, ""


#: Hooks' target sizes: a hook process's p50 may exceed the floor's by this much.
HOOK_MARGINS = {10_000: 0.150, 100_000: 0.300}


def _hooks_target(h: dict[str, Any]) -> Judged:
    sizes = h.get("latency", {}).get("sizes", {})
    if not sizes:
        return None
    records = min(sizes, key=lambda size: abs(int(size) - 10_000))
    row = sizes[records]
    over = max(row[p]["p50_s"] for p in ("prompt", "session-start")) - row["floor"]["p50_s"]
    at = _at(int(records), "records", int(records) == 10_000)
    return f"+{over * 1000:.0f} ms", at + ", the slower hook", over <= HOOK_MARGINS[10_000], ""


def _postgres_target(words: str) -> Callable[[dict[str, Any]], Judged]:
    """The target of ``postgres.py`` whose name holds ``words``, as it judged it."""

    def judge(pg: dict[str, Any]) -> Judged:
        for t in pg.get("targets", []):
            if words in t["target"]:
                at = f"{t['records']:,} records" + (
                    f" over {t['base_records']:,}" if "base_records" in t else ""
                )
                indicative = " (indicative)" if t["indicative"] else ""
                return f"{t['measured']:.2f}x", at + indicative, bool(t["pass"]), ""
        return None

    return judge


#: The headline targets: each with the part of the results it is judged on (a
#: section, or a part of one) and its judge.
TARGETS: tuple[tuple[str, tuple[str, ...], Callable[[dict[str, Any]], Judged]], ...] = (
    ("tag intersection >= 10x faster than SQLite SQL", ("structure",), _structure_target),
    ("exact vector top-10 <= 1.5x the numpy floor", ("vector",), _vector_target),
    ("MCP store p50 <= 2 ms", ("mcp",), _mcp_store_target),
    ("text query p50 <= 15 ms", ("recall", "text_latency"), _text_target),
    ("resident memory <= 400 MB", ("recall", "text_latency"), _memory_target),
    (">= 10x the reference memory server's store throughput", ("mcp",), _peer_target),
    ("MCP tools/list < 2,000 tokens", ("tools",), _tools_target),
    ("inspector page p50 <= 100 ms", ("inspector",), _inspector_target),
    ("hook process p50 <= the floor + 150 ms", ("hooks",), _hooks_target),
    ("PostgreSQL tag query <= 1.5x plain SQL", ("postgres",), _postgres_target("tag query")),
    (
        "PostgreSQL server start-up at 1,000,000 <= 1.5x at 10,000",
        ("postgres",),
        _postgres_target("server start-up"),
    ),
    (
        "PostgreSQL server memory at 1,000,000 <= 1.5x at 10,000",
        ("postgres",),
        _postgres_target("server memory"),
    ),
)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each headline target with what was measured, where, and PASS or MISS.

    A target whose comparison failed a check anywhere in its part of the results
    (any size, any system) is not comparable: no figure, no PASS or MISS, only
    the reason. A section not run, or whose data was unavailable, judges nothing.
    """
    out: list[dict[str, Any]] = []
    for name, path, judge in TARGETS:
        part: Any = results["sections"]
        for key in path:
            part = part.get(key) if isinstance(part, dict) else None
        if not isinstance(part, dict) or "unavailable" in part:
            continue
        found = problems(part)
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            note = f"{': '.join(path)}: {found[0]}{more}"
            out.append(_target(name, None, "-", None, note, comparable=False))
        elif (judged := judge(part)) is not None:
            out.append(_target(name, *judged))
    return out


def _target(
    name: str, measured: str | None, at: str, ok: bool | None, note: str, comparable: bool = True
) -> dict[str, Any]:
    fields = ("target", "measured", "at", "pass", "note", "comparable")
    return dict(zip(fields, (name, measured, at, ok, note, comparable)))


def _script(name: str) -> Any:
    """A benchmark script's module, whose tables a section shows as its script prints them."""
    return importlib.import_module(name)


# -- Markdown ---------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    parts = [
        "# Benchmark report\n",
        f"- date: {results['date']} ({results['profile']} run, {results['seconds'] / 60:.1f} min)",
        f"- CPU: {m['cpu']}, {m['cores']} cores; RAM: "
        + (f"{m['ram_bytes'] / 2**30:.1f} GiB" if m.get("ram_bytes") else "unknown"),
        f"- OS: {m['os']}; Python {m['python']}; numpy {m['numpy']}; SQLite {m['sqlite']}",
        f"- load average (1, 5, 15 min) before: {m.get('load_before')}, "
        f"after: {m.get('load_after')}",
        f"- CPU reference (a fixed pure-Python loop, best of 3) before: "
        f"{m.get('cpu_reference_ms_before')} ms, after: {m.get('cpu_reference_ms_after')} ms; "
        "compare absolute times only between runs where it agrees",
        "",
        "Every comparison below was measured side by side in this run, after checking that "
        "the systems compared return the same results. Ratios are the other system's time "
        "over this engine's (or, for vectors, over the numpy floor's).\n",
    ]
    failed = disagreements(results)
    if failed:
        parts.append("## Failed checks\n")
        parts.append(
            "These checks failed, so the comparisons they guard are not comparable: "
            "they have no ratio and no verdict, and the run exits with status 1.\n"
        )
        parts += [f"- {f}" for f in failed]
        parts.append("")
    parts.append("## Targets\n")
    rows = []
    for t in results["targets"]:
        if not t.get("comparable", True):
            verdict = "not comparable"
        else:
            verdict = "n/a" if t["pass"] is None else "PASS" if t["pass"] else "MISS"
        rows.append([t["target"], t["at"], t["measured"] or "-", f"**{verdict}**", t["note"]])
    parts.append(table(["target", "at", "measured", "verdict", "note"], rows))
    sections: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
        "structure": ("1. Structural queries", _structure),
        "vector": ("2. Exact vector top-10", _vector),
        "mcp": ("3. Through MCP, against the reference memory server", _mcp),
        "recall": ("4. Recall quality and text query latency", _recall),
        "fold": ("5. Folding and start-up", _fold),
        "ingest": ("6. Writes", _ingest),
        "soak": ("7. Soaks (checks, not timings)", _soak),
        "warmth": ("8. Warm and cold calls", _warmth),
        "inspector": ("9. The inspector's pages", _inspector),
        "tools": ("10. The size of `tools/list`", _tools),
        "hooks": ("11. Hook processes", _hooks),
        "postgres": ("12. PostgreSQL beside SQLite and plain SQL", _postgres),
    }
    for name, section in results["sections"].items():
        title, render = sections[name]
        parts.append(f"\n## {title}\n")
        parts.append(failure(section) if section_failed(section) else render(section))
    if results.get("charts"):
        parts.append("\n## Charts\n")
        parts += [f"![{Path(c).stem}]({Path(c).name})" for c in results["charts"]]
    elif results.get("charts_skipped"):
        parts.append(f"\n## Charts\n\nNone: {results['charts_skipped']}.")
    return "\n".join(parts) + "\n"


def _structure(s: dict[str, Any]) -> str:
    structure = _script("structure")
    runs = [run for run in s["runs"] if "failed" not in run]
    notes = [
        f"- {run['records']:,} records: **FAILED** ({run['failed']}): "
        + " / ".join(run["output"][-3:])
        for run in s["runs"]
        if "failed" in run
    ] + [
        f"- {r['records']:,} records: agreement OK on all {len(r['queries'])} queries" for r in runs
    ]
    kinds = [(f"{r['records']:,}", structure.kind_table(r["kinds"], "engine", 1)) for r in runs]
    parts = [
        (f"{r['records']:,}", structure.parts_table(r["parts_median_seconds"]))
        for r in runs
        if r.get("parts_median_seconds")
    ]
    text = (
        "Median time per query (each query's median over rounds, interleaved single calls); "
        "(Nx) = that system's time / the engine's. Text embedding is off for these stores.\n\n"
        + (table(*harness.stacked("records", kinds)) if kinds else _NO_TIMINGS)
        + "\n"
        + "\n".join(notes)
        + "\n"
    )
    if parts:
        text += (
            "\nWhere the engine's time goes (a second pass, each call timed right after a scan "
            "of every record): the index alone answers without the lock, the check for other "
            "processes' commits or argument checks; the coherence check is the `PRAGMA "
            "data_version` statement every query runs first.\n\n"
            + table(*harness.stacked("records", parts))
        )
    return text


def _vector(v: dict[str, Any]) -> str:
    vector_topk = _script("vector_topk")
    notes = []
    for r in v["sizes"]:
        if not r["agreement"]:
            problems = "; ".join(r["problems"][:3])
            notes.append(f"- {r['records']:,} vectors: agreement **FAILED**: {problems}")
            continue
        notes.append(
            f"- {r['records']:,} vectors: agreement OK (same top-10 ids in the same order, "
            f"ties aside) on {r['queries']} queries"
        )
        if r["sqlite_vec_unavailable"]:
            notes.append(f"- sqlite-vec unavailable: {r['sqlite_vec_unavailable']}")
        elif r["records"] == v["sizes"][0]["records"]:
            notes.append(f"- {r['sqlite_vec']}")
    times, steps = vector_topk.tables(v["sizes"])
    if not times[1]:
        return _NO_TIMINGS + "\n" + "\n".join(notes) + "\n"
    return (
        "Top-10 by cosine over 256-dimensional vectors, median per query; "
        "(Nx) = time / the numpy floor.\n\n"
        + table(*times)
        + "\nWhere the engine's time goes (each step timed alone; `rank_by_vector` "
        "includes cosine and top-k, `hits` reads the 10 records from SQLite):\n\n"
        + table(*steps)
        + "\n"
        + "\n".join(notes)
        + "\n"
    )


def _mcp(m: dict[str, Any]) -> str:
    sizes, notes = [], []
    for row in m["sizes"]:
        if row["agreement"]:
            sizes.append((f"{row['records']:,}", _script("mcp_peer").table(row)))
        ratio = row.get("store_throughput_ratio")
        agreement = "OK" if row["agreement"] else "**FAILED**"
        notes.append(
            f"- N = {row['records']:,}: agreement {agreement} (stored names found by both)"
            + (f"; store throughput, ours / reference: **{ratio:.1f}x**" if ratio else "")
        )
        if not row["agreement"]:
            missed = [
                f"{name} did not find {', '.join(s['agreement']['missed'])}"
                for name, s in row["systems"].items()
                if s["agreement"]["missed"]
            ]
            notes[-1] += f": {'; '.join(missed)}; not comparable, so no timings"
    peer = m.get("peer") or f"unavailable: {m.get('peer_unavailable')}"
    floor = m.get("sdk_floor")
    if floor:
        notes.append(
            f"- SDK floor (a bare SDK server's trivial tool, same client): p50 {ms(floor['p50'])}, "
            f"p99 {ms(floor['p99'])} over {floor['calls']:,} calls"
        )
    if not sizes:
        return f"Reference server: {peer}.\n\n{_NO_TIMINGS}\n" + "\n".join(notes) + "\n"
    return (
        f"Reference server: {peer}. Each system gets a fresh store per N; this server runs its "
        "default configuration (text embedded with the built-in model on every store). "
        f"A system past {m['cap_seconds']:.0f} s in a phase is stopped and marked capped.\n\n"
        + table(*harness.stacked("N", sizes))
        + "\n"
        + "\n".join(notes)
        + "\n"
    )


def _recall(r: dict[str, Any]) -> str:
    out = ""
    loco = r.get("locomo")
    if loco is not None:
        if section_failed(loco):
            out += "LoCoMo: " + failure(loco)
        elif "unavailable" in loco:
            out += f"LoCoMo: not run: {loco['unavailable']}.\n"
        else:
            names = {
                "bm25": "BM25 (FTS5)",
                "builtin": "dense (built-in model)",
                "hybrid (default)": "hybrid (default)",
            }
            rows = []
            for key, table_ in loco["systems"].items():
                o = table_["overall"]
                rows.append([names.get(key, key), f"{int(o['n'])}", *(f"{o[k]:.1f}" for k in KS)])
            rows.append([DRAGON_LABEL, "-", *(f"{DRAGON[k]:.1f}" for k in KS)])
            conversations = loco.get("conversations")
            data = f"{Path(loco['data']).name}" + (
                f", {conversations} conversations" if conversations else ""
            )
            out += (
                f"LoCoMo (dialog-turn evidence), recall in percent, all questions with evidence "
                f"in {data}:\n\n"
            )
            out += table(["system", "questions", *KS], rows)
            out += (
                f"\nThe {DRAGON_LABEL} row is the figure published for all ten conversations, "
                f"not measured in this run; the rows above it are measured on {data}, so the "
                "two differ in the questions asked and compare only roughly.\n"
            )
            hybrid = loco["systems"].get("hybrid (default)")
            if hybrid:
                cats = [
                    [g, f"{int(v['n'])}", *(f"{v[k]:.1f}" for k in KS)]
                    for g, v in hybrid.items()
                    if g != "overall"
                ]
                out += "\nHybrid by question category:\n\n" + table(
                    ["category", "questions", *KS], cats
                )
    t = r.get("text_latency")
    if t and "failed" in t:
        out += f"\nText query benchmark failed: {t['failed']}.\n"
    elif t:
        out += (
            f"\nText query latency (`text_query.py`): `query(text=..., limit=10)` on "
            f"{t['records']:,} synthetic records embedded with `{t['embedder']}`, "
            f"{t['queries']} queries: p50 {ms(t['p50'])}, p95 {ms(t['p95'])} "
            f"(with a domain gate: p50 {ms(t['gated_p50'])}); `store_many` with embedding "
            f"{t['store_rate']:,.0f} records/s; peak resident memory {t['max_rss_mb']:,.0f} MB.\n"
        )
    return out


def _fold_scale(scale: dict[str, Any]) -> str:
    """Full folds per layout at two sizes, from ``fold.py``."""
    if "layouts" not in scale:
        return f"Folding at scale: {scale.get('failed', 'not run')}.\n\n"
    rows = []
    for layout, row in scale["layouts"].items():
        sizes = sorted(int(k) for k in row if k.isdigit())
        if len(sizes) != 2:
            continue
        small, large = (row[str(n)] for n in sizes)
        rows.append([
            layout,
            f"{sizes[0]:,}: {small['seconds']:.2f} s",
            f"{sizes[1]:,}: {large['seconds']:.2f} s",
            f"{large['seconds'] / small['seconds']:.1f}x",
            f"{large['peak'] / 2**30:.2f} GB",
        ])  # fmt: skip
    met = "met" if scale.get("targets_met") else "**not all met** (see fold.py's output)"
    return (
        "Full folds at scale (`fold.py`; targets "
        + met
        + "):\n\n"
        + table(["layout", "smaller", "larger", "growth", "peak memory"], rows)
        + "\n"
    )


def _fold(f: dict[str, Any]) -> str:
    rows = [[f"{x['records']:,}", f"{x['seconds']:.2f} s", f"{x['after']:,}"] for x in f["fold"]]
    q, s, i = f["merge_quality"], f["startup"], f["import"]
    startups = [
        (f"prime-memory-mcp: spawn to `initialize` reply ({s['runs']} runs)", s["ours"]),
        ("bare SDK server, one trivial tool", s["bare_sdk"]),
        (f"`import prime_memory_folding` in a fresh interpreter ({i['runs']} runs)", i["package"]),
        ("a fresh interpreter doing nothing", i["bare_python"]),
    ]
    return (
        "Fold time (256-dimensional vectors in families of near-duplicates, default policy, "
        "three days after storing):\n\n"
        + table(["records", "fold time", "records after"], rows)
        + f"\nMerge quality: pair precision {q['precision']:.3f} ({q['pairs']} pairs), "
        f"pair recall {q['recall']:.3f} ({q['true_pairs']} true pairs).\n\n"
        + _fold_scale(f.get("fold_scale", {}))
        + table(["start-up", "median"], [[what, ms(seconds)] for what, seconds in startups])
    )


def _ingest(g: dict[str, Any]) -> str:
    ingest = _script("ingest")
    return table(*ingest.table(g)) + "\n" + "".join(f"- {line}\n" for line in ingest.lines(g))


def _soak(s: dict[str, Any]) -> str:
    rows = []
    for name, r in s.items():
        verdict = "FAILED: " + r["failed"] if "failed" in r else "OK" if r.get("ok") else "FAILED"
        rows.append([f"`{name} {r['args']}`", verdict, f"{r['wall_seconds']:.1f} s"])
    return table(["run", "check", "wall time"], rows)


def _warmth(w: dict[str, Any]) -> str:
    return (
        table(*_script("warmth").table(w["median_seconds"]))
        + f"\n{w['rounds']} rounds over {w['records']:,} records; (Nx) = that median over "
        "the warm one.\n"
    )


def _inspector(section: dict[str, Any]) -> str:
    if not section.get("agreement"):
        return "Agreement FAILED: " + "; ".join(section.get("problems", [])) + "\n"
    return (
        table(*_script("inspector").table(section))
        + f"\n{section['rounds']} requests per page over {section['records']:,} records, "
        "in process through Starlette's test client.\n"
    )


def _tools(section: dict[str, Any]) -> str:
    counters = list(section["pass"])
    rows = []
    for name, parts in section["tools"].items():
        rows.append(
            [f"`{name}`"]
            + [f"{sum(part[c] for part in parts.values()):,}" for c in [*counters, "bytes"]]
        )
    total = section["total"]
    rows.append(["the whole reply"] + [f"{total[c]:,}" for c in [*counters, "bytes"]])
    return (
        table(["tool", *counters, "bytes"], rows)
        + "\nThe stdio server's reply to `tools/list`, as it arrived; each tool's row counts "
        "its description, schemas and annotations, without the JSON that joins them.\n"
    )


def _hooks(section: dict[str, Any]) -> str:
    latency = section.get("latency", {})
    rows = []
    for records, row in latency.get("sizes", {}).items():
        floor = row["floor"]["p50_s"]
        for process in ("prompt", "session-start", "floor"):
            p = row[process]
            over = "" if process == "floor" else f"+{(p['p50_s'] - floor) * 1000:.0f} ms"
            rows.append([f"{int(records):,}", process, ms(p["p50_s"]), ms(p["p95_s"]), over])
    return (
        table(["records", "process", "p50", "p95", "p50 - floor"], rows)
        + "\nWhole `prime-memory hook` processes, JSON on standard input, taking turns "
        "with the floor: a Python process that imports json and sqlite3 and reads "
        "standard input.\n"
    )


def _postgres(section: dict[str, Any]) -> str:
    if "unavailable" in section:
        return f"Not run: {section['unavailable']}.\n"
    postgres = _script("postgres")
    sizes, notes = [], []
    for r in section["sizes"]:
        if not r.get("agreement"):
            notes.append(
                f"- {r['records']:,} records: agreement **FAILED**: "
                + "; ".join(r.get("problems", [])[:3])
            )
            continue
        sizes.append((f"{r['records']:,}", postgres.size_table(r)))
        s, m = r["startup_seconds"], r["rss_mib"]
        base = r.get("base_system")
        if base:
            notes.append(
                f"- {r['records']:,} records: a server on a second PostgreSQL store ({base}), "
                f"started in the same turns: start-up {ms(s[base])}, memory {m[base]:,.0f} MiB; "
                f"the growing store's over it: {s['postgres'] / s[base]:.2f}x and "
                f"{m['postgres'] / m[base]:.2f}x"
            )
        notes.append(
            f"- {r['records']:,} records: agreement OK (same count; same tag-query top-10 from "
            f"both engines, plain SQL and both servers; exact vector top-10); text top-10 "
            f"overlap between the engines {100 * r['text_top10_overlap']:.0f} %; fold (dry "
            f"run): {postgres.fold_text(r['fold'])}"
        )
    if not sizes:
        return _NO_TIMINGS + "\n" + "\n".join(notes) + "\n"
    return (
        "p50 per call, the systems taking turns; start-up is spawn to the first tag "
        "query's answer through `prime_memory_query` (plain SQL: a fresh process that "
        "connects with psycopg and asks), memory that process's RSS after its first queries.\n\n"
        + table(*harness.stacked("records", sizes))
        + "\n"
        + "\n".join(notes)
        + "\n"
    )


# -- charts -----------------------------------------------------------------------------


def charts(results: dict[str, Any], folders: list[Path]) -> list[str]:
    """PNG charts into every folder; the paths written into the first. Needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        results["charts_skipped"] = (
            "matplotlib is not installed (pip install -e '.[bench]' installs it)"
        )
        return []
    footer = machine_line(results)
    made: list[str] = []
    for name, draw in (
        ("structure", _chart_structure),
        ("vector_topk", _chart_vector),
        ("mcp_store_latency", _chart_mcp),
        ("locomo_recall", _chart_locomo),
        ("fold_time", _chart_fold),
    ):
        fig = draw(plt, results["sections"])
        if fig is None:
            continue
        fig.text(0.99, 0.005, footer, ha="right", va="bottom", fontsize=7, color="0.4")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        for i, folder in enumerate(folders):
            folder.mkdir(parents=True, exist_ok=True)
            fig.savefig(folder / f"{name}.png", dpi=120)
            if i == 0:
                made.append(str(folder / f"{name}.png"))
        plt.close(fig)
    return made


def _ok(sections: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The section, if every check in it passed: no chart is drawn from one that failed."""
    s = sections.get(name)
    return None if s is None or problems(s) else s


def _finish(ax: Any, title: str, *, legend: bool = True, which: str = "both") -> Any:
    """Title, grid and legend of one chart's axes; its figure."""
    ax.set_title(title)
    ax.grid(True, which=which, alpha=0.3)
    if legend:
        ax.legend()
    return ax.figure


def _chart_structure(plt: Any, sections: dict[str, Any]) -> Any:
    s = _ok(sections, "structure")
    runs = [r for r in s["runs"] if "kinds" in r] if s else []
    if not runs:
        return None
    kinds = list(runs[0]["kinds"])
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for ax, kind in zip(axes.flat, kinds):
        for system in ("engine", "naive scan", "modulo scan", "sqlite sql"):
            xs = [r["records"] for r in runs if kind in r["kinds"]]
            ys = [
                r["kinds"][kind]["median_seconds"][system] * 1000
                for r in runs
                if kind in r["kinds"]
            ]
            ax.plot(xs, ys, marker="o", label=system)
        ax.set(xscale="log", yscale="log", xlabel="records", ylabel="median query time (ms)")
        _finish(ax, kind, legend=False)
    axes.flat[0].legend()
    fig.suptitle("Structural queries: time vs records (lower is better)")
    return fig


def _chart_vector(plt: Any, sections: dict[str, Any]) -> Any:
    v = _ok(sections, "vector")
    runs = [r for r in v["sizes"] if r.get("agreement")] if v else []
    if not runs:
        return None
    ax = plt.subplots(figsize=(7, 4.5))[1]
    for system in ("engine", "numpy floor", "sqlite-vec"):
        pts = [
            (r["records"], r["median_seconds"][system] * 1000)
            for r in runs
            if system in r["median_seconds"]
        ]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=system)
    ax.set(xscale="log", yscale="log", xlabel="vectors (dim 256)", ylabel="median top-10 time (ms)")
    return _finish(ax, "Exact cosine top-10: time vs vectors (lower is better)")


def _chart_mcp(plt: Any, sections: dict[str, Any]) -> Any:
    m = _ok(sections, "mcp")
    if not m or not m["sizes"]:
        return None
    ax = plt.subplots(figsize=(7, 4.5))[1]
    for name in m["sizes"][-1]["systems"]:
        row = max((r for r in m["sizes"] if name in r["systems"]), key=lambda r: r["records"])
        pts = row["systems"][name]["store_curve"]
        ax.plot([x for x, _ in pts], [y * 1000 for _, y in pts], marker=".", label=name)
    ax.set(
        xlabel="records already stored",
        ylabel="store round trip, p50 of stretch (ms)",
        yscale="log",
    )
    return _finish(ax, "MCP store latency vs store size (stdio, same client)")


def _chart_locomo(plt: Any, sections: dict[str, Any]) -> Any:
    r = _ok(sections, "recall")
    loco = r.get("locomo") if r else None
    if not loco or section_failed(loco):
        return None
    ks = [int(k[2:]) for k in KS]
    ax = plt.subplots(figsize=(7, 4.5))[1]
    for name, t in loco["systems"].items():
        ax.plot(ks, [t["overall"][k] for k in KS], marker="o", label=name)
    ax.plot(
        ks,
        [DRAGON[k] for k in KS],
        marker="s",
        linestyle="--",
        color="0.3",
        label=DRAGON_LABEL,
    )
    ax.set(
        xscale="log", xticks=ks, xticklabels=[str(k) for k in ks], xlabel="k", ylabel="recall@k (%)"
    )
    return _finish(ax, "LoCoMo evidence recall@k", which="major")


def _chart_fold(plt: Any, sections: dict[str, Any]) -> Any:
    f = _ok(sections, "fold")
    if not f:
        return None
    ax = plt.subplots(figsize=(7, 4.5))[1]
    ax.plot([x["records"] for x in f["fold"]], [x["seconds"] for x in f["fold"]], marker="o")
    ax.set(xscale="log", yscale="log", xlabel="records", ylabel="fold time (s)")
    return _finish(ax, "Fold time vs records", legend=False)
