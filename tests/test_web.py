"""The inspector's pages and actions through Starlette's test client, and its security."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from prime_memory_folding import MemoryEngine
from prime_memory_folding.web import Secrets, create_app
from tests.conftest import FakeClock

TOKEN = "inspector-test-token-0123456789"
CSRF = "csrf-test-token-9876543210"
DAY = 86_400.0
XSS = "<script>alert('owned')</script>"


def _client(engine: MemoryEngine, *, login: bool = True) -> TestClient:
    keys = Secrets(token=TOKEN, cookie="pmi", csrf=CSRF)
    client = TestClient(create_app(engine, keys, ["testserver"]), follow_redirects=False)
    if login:
        client.cookies.set("pmi", TOKEN)
    return client


@pytest.fixture
def client(engine: MemoryEngine) -> Iterator[TestClient]:
    with _client(engine) as c:
        yield c


def hidden_fields(page: str) -> list[tuple[str, str]]:
    """The hidden inputs of the last form on a page, in order."""
    form = page[page.rindex("<form") :]
    return [
        (html.unescape(name), html.unescape(value))
        for name, value in re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', form)
    ]


def form(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Form fields as the test client takes them, repeated names kept."""
    fields: dict[str, list[str]] = {}
    for name, value in pairs:
        fields.setdefault(name, []).append(value)
    return fields


def state(engine: MemoryEngine) -> tuple[Any, ...]:
    """Everything an action could change: live records and the archive."""
    ids = sorted(engine.match_ids(scopes=["*"]))
    records = tuple(engine.get(rid) for rid in ids)
    archived = engine.archive_entries(limit=1_000)
    return records, tuple(e.record.record_id for e in archived.entries)


def _foldable(engine: MemoryEngine, clock: FakeClock) -> dict[str, list[str]]:
    groups = {
        "lint": [
            ("Run make lint before pushing; CI fails on any warning.", [1.0, 0.0, 0.0]),
            ("Run make lint before you push; CI fails on any warning.", [0.99, 0.1, 0.0]),
        ],
        "deploy": [
            ("Deploy with make release after the tag is pushed.", [0.0, 1.0, 0.0]),
            ("Deploy with make release once the tag is pushed.", [0.1, 0.99, 0.0]),
        ],
    }
    ids = {
        name: [
            engine.store(text, subdomain="procedural", tags=[name], vector=v).record_id
            for text, v in pairs
        ]
        for name, pairs in groups.items()
    }
    ids["scratch"] = [engine.store("Scratch note", importance=0.1, vector=[0, 0, 1.0]).record_id]
    clock.advance(30 * DAY)
    return ids


# -- security ---------------------------------------------------------------------


def test_the_token_in_the_url_becomes_a_strict_http_only_cookie(engine: MemoryEngine) -> None:
    client = _client(engine, login=False)
    answer = client.get(f"/memories?token={TOKEN}&q=lint")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/memories?q=lint"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"pmi={TOKEN};")
    assert "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower()
    assert client.get("/memories").status_code == 200


PAGES = [
    "/",
    "/overview",
    "/memories",
    "/memories?q=x",
    "/fold",
    "/fold/result",
    "/archive",
    "/live",
    "/live/feed?since=0",
    "/static/htmx.min.js",
    "/static/inspector.css",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_refuses_a_request_without_the_token(engine: MemoryEngine, path: str) -> None:
    engine.store("a secret memory")
    client = _client(engine, login=False)
    answer = client.get(path)
    assert answer.status_code == 403
    assert "secret memory" not in answer.text
    assert "prime-memory ui" in answer.text


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers_with_the_token(client: TestClient, path: str) -> None:
    assert client.get(path).status_code in (200, 303)


def test_a_wrong_token_is_refused_in_the_url_and_in_the_cookie(engine: MemoryEngine) -> None:
    client = _client(engine, login=False)
    answer = client.get("/memories?token=not-the-token")
    assert answer.status_code == 403
    assert "set-cookie" not in answer.headers
    client.cookies.set("pmi", "not-the-token")
    assert client.get("/memories").status_code == 403


def test_an_unknown_host_is_refused_even_with_the_token(client: TestClient) -> None:
    answer = client.get("/memories", headers={"host": "attacker.example:8765"})
    assert answer.status_code == 400
    answer = client.get(f"/?token={TOKEN}", headers={"host": "attacker.example"})
    assert answer.status_code == 400
    assert "set-cookie" not in answer.headers


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://attacker.example"},
        {"origin": "null"},
        {"origin": "http://testserver.attacker.example"},
        {"sec-fetch-site": "cross-site"},
    ],
)
def test_a_cross_site_request_is_refused(
    client: TestClient, engine: MemoryEngine, headers: dict[str, str]
) -> None:
    rid = engine.store("keep me").record_id
    before = state(engine)
    answer = client.post(
        "/memories/bulk",
        data={"csrf": CSRF, "action": "forget", "ids": rid, "confirm": "yes", "expected": "1"},
        headers=headers,
    )
    assert answer.status_code == 403
    assert state(engine) == before


def test_the_same_origin_is_let_through(client: TestClient) -> None:
    assert client.get("/memories", headers={"origin": "http://testserver"}).status_code == 200


def _actions(engine: MemoryEngine, clock: FakeClock) -> list[tuple[str, dict[str, Any]]]:
    ids = _foldable(engine, clock)
    engine.fold(keep_apart=ids["deploy"])
    folded = next(rid for rid in engine.match_ids() if engine.get(rid).metadata.get("folded_from"))
    live = ids["deploy"][0]
    archived = ids["scratch"][0]
    return [
        ("/memories/bulk", {"action": "forget", "ids": live, "confirm": "yes", "expected": "1"}),
        ("/memories/bulk", {"action": "tag", "value": "x", "apply_to": "filter"}),
        (f"/memories/{live}/edit", {"content": "changed", "tags": "", "importance": "0.5"}),
        (f"/memories/{live}/reinforce", {}),
        (f"/memories/{folded}/unfold", {}),
        (f"/archive/{archived}/restore", {}),
        ("/archive/purge", {"confirm": "yes", "expected": "3"}),
        ("/fold/apply", {"now": str(clock.now)}),
    ]


@pytest.mark.parametrize("csrf", [None, "stale-token-from-an-earlier-run"])
def test_every_action_refuses_a_missing_or_stale_csrf_token(
    client: TestClient, engine: MemoryEngine, clock: FakeClock, csrf: str | None
) -> None:
    for path, data in _actions(engine, clock):
        before = state(engine)
        sent = data if csrf is None else {**data, "csrf": csrf}
        answer = client.post(path, data=sent)
        assert answer.status_code == 403, path
        assert "CSRF" in answer.text
        assert ("stale" in answer.text) == (csrf is not None)
        assert state(engine) == before, path


def test_the_csrf_header_stands_in_for_the_form_field(
    client: TestClient, engine: MemoryEngine
) -> None:
    rid = engine.store("reinforce me").record_id
    answer = client.post(f"/memories/{rid}/reinforce", headers={"x-csrf-token": CSRF})
    assert answer.status_code == 303
    assert engine.get(rid).access_count == 1


@pytest.mark.parametrize(
    "path",
    ["/memories/bulk", "/fold/apply", "/archive/purge", f"/memories/{'a' * 32}/reinforce"],
)
def test_state_changing_addresses_refuse_get(
    client: TestClient, engine: MemoryEngine, path: str
) -> None:
    before = state(engine)
    answer = client.get(path)
    # /memories/bulk also reads as a memory's address, with a malformed id.
    assert answer.status_code == (400 if path == "/memories/bulk" else 405)
    assert state(engine) == before
    assert "Traceback" not in answer.text


def test_memory_content_is_escaped_on_every_page(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    rid = engine.store(XSS, importance=0.1, metadata={"note": XSS}).record_id
    other = engine.store(f"{XSS} archived", importance=0.1).record_id
    engine.archive([other])
    clock.advance(30 * DAY)
    pages = [
        "/memories",
        "/memories?q=alert",
        f"/memories/{rid}",
        f"/memories/{other}",
        "/overview",
        "/live",
        "/archive",
        "/fold",
    ]
    for path in pages:
        page = client.get(path).text
        assert "<script>alert" not in page, path
        assert "&lt;script&gt;alert(" in page, path


def test_every_page_sends_a_strict_content_security_policy(client: TestClient) -> None:
    answer = client.get("/memories")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["cache-control"] == "no-store"
    page = answer.text
    assert "<script>" not in page  # no inline script: everything loads from /static
    assert re.findall(r'src="([^"]+)"', page) == ["/static/htmx.min.js", "/static/inspector.js"]


# -- pages --------------------------------------------------------------------------


def test_pages_work_without_javascript_as_plain_forms_and_links(client: TestClient) -> None:
    memories = client.get("/memories").text
    assert '<form id="filters" method="get" action="/memories"' in memories
    assert '<button type="submit">Search</button>' in memories
    assert '<form method="post" action="/memories/bulk" id="bulk">' in memories
    live = client.get("/live").text
    assert '<noscript><meta http-equiv="refresh" content="10"></noscript>' in live


def test_the_overview_shows_counts_charts_and_what_was_never_recalled(
    client: TestClient, engine: MemoryEngine
) -> None:
    a = engine.store("alpha", domain="decision", tags=["db"], scope="project:demo").record_id
    b = engine.store("beta", tags=["db", "ops"]).record_id
    engine.reinforce(b)
    page = client.get("/overview").text
    assert '<dd id="record-count">2</dd>' in page
    assert "project:demo" in page
    assert "decision" in page
    assert page.count("<svg") == 2
    assert "Strength now histogram" in page
    never = page[page.index("Never recalled") :]
    assert f"/memories/{a}" in never
    assert f"/memories/{b}" not in never


def test_the_root_leads_to_the_overview(client: TestClient) -> None:
    answer = client.get("/")
    assert (answer.status_code, answer.headers["location"]) == (303, "/overview")


def _listed(page: str) -> list[str]:
    body = page[page.index("<tbody>") :]
    return re.findall(r'name="ids" value="([0-9a-f]{32})"', body)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("domain=decision", {"db"}),
        ("subdomain=procedural", {"deploy"}),
        ("tags=alpha,beta", {"both"}),
        ("any_tags=beta", {"both", "beta"}),
        ("not_tags=alpha", {"beta", "db", "deploy", "weak"}),
        ("scope=project:demo", {"deploy"}),
        ("max_strength=0.3", {"weak"}),
        ("min_strength=0.3", {"both", "beta", "db", "deploy"}),
        ("q=database", {"db"}),
        ("q=database&domain=memory", set()),
    ],
)
def test_the_memories_page_filters_by_every_gate(
    client: TestClient, engine: MemoryEngine, clock: FakeClock, query: str, expected: set[str]
) -> None:
    names = {
        "both": engine.store("both tags", tags=["alpha", "beta"]).record_id,
        "beta": engine.store("beta only", tags=["beta"]).record_id,
        "db": engine.store("the database is SQLite", domain="decision").record_id,
        "deploy": engine.store(
            "deploy steps", subdomain="procedural", scope="project:demo"
        ).record_id,
        "weak": engine.store("weak note", importance=0.1).record_id,
    }
    clock.advance(2 * DAY)
    answer = client.get(f"/memories?{query}")
    assert answer.status_code == 200
    found = set(_listed(answer.text))
    assert found == {names[n] for n in expected}


def test_the_memories_page_filters_by_time_range(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    clock.now = 1_767_225_600.0  # 2026-01-01 00:00 UTC
    old = engine.store("new year").record_id
    clock.advance(10 * DAY)
    new = engine.store("ten days on").record_id
    assert _listed(client.get("/memories?until=2026-01-01").text) == [old]
    assert _listed(client.get("/memories?since=2026-01-02").text) == [new]
    assert _listed(client.get("/memories?since=2026-01-01&until=2026-01-11").text) == [new, old]


def test_the_memories_page_sorts_and_pages(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    ids = []
    for n in range(12):
        ids.append(engine.store(f"note {n}").record_id)
        clock.advance(60)
    first = client.get("/memories?order=newest&size=5").text
    assert _listed(first) == ids[::-1][:5]
    assert "Page 1 of 3" in first
    assert "page=2" in first
    third = client.get("/memories?order=newest&size=5&page=3").text
    assert _listed(third) == ids[::-1][10:]
    assert _listed(client.get("/memories?order=oldest&size=3").text) == ids[:3]


def test_a_text_query_shows_each_rows_score_parts(client: TestClient, engine: MemoryEngine) -> None:
    engine.store("SQLite runs in WAL mode")
    engine.store("Nothing to see")
    page = client.get("/memories?q=sqlite").text
    assert "<th>Score parts</th>" in page
    assert re.search(r"<span>bm25 [-0-9.e]+</span>", page)
    assert len(_listed(page)) == 1


def test_live_search_answers_with_the_results_fragment_only(
    client: TestClient, engine: MemoryEngine
) -> None:
    rid = engine.store("fragment me").record_id
    answer = client.get(
        "/memories?q=fragment", headers={"hx-request": "true", "hx-target": "results"}
    )
    assert answer.status_code == 200
    assert "<html" not in answer.text
    assert _listed(answer.text) == [rid]
    bad = client.get(
        "/memories?min_strength=lots", headers={"hx-request": "true", "hx-target": "results"}
    )
    assert bad.status_code == 400
    assert "min strength must be a number" in bad.text
    assert "<html" not in bad.text


def _confirm_and_apply(client: TestClient, data: dict[str, Any]) -> tuple[str, Any]:
    ask = client.post("/memories/bulk", data={"csrf": CSRF, **data})
    assert ask.status_code == 200
    fields = hidden_fields(ask.text)
    done = client.post("/memories/bulk", data=form(fields))
    return ask.text, done


def test_bulk_forget_by_filter_asks_with_the_count_then_archives(
    client: TestClient, engine: MemoryEngine
) -> None:
    doomed = [engine.store(f"temp {n}", tags=["temp"]).record_id for n in range(3)]
    kept = engine.store("keep", tags=["keep"]).record_id
    ask = client.post(
        "/memories/bulk",
        data={"csrf": CSRF, "action": "forget", "apply_to": "filter", "tags": "temp"},
    )
    assert "Forget <strong>3</strong> memories into the archive?" in ask.text
    assert len(engine.match_ids()) == 4  # nothing changes before the confirmation
    done = client.post("/memories/bulk", data=form(hidden_fields(ask.text)))
    assert done.status_code == 303
    assert done.headers["location"] == "/memories?tags=temp&order=salience"
    assert engine.match_ids() == [kept]
    archived = engine.archive_entries().entries
    assert {e.record.record_id for e in archived} == set(doomed)
    assert "3 memories into the archive" in client.get("/memories").text


@pytest.mark.parametrize(
    ("action", "value", "check"),
    [
        ("move", "project:other", lambda r: r.scope == "project:other"),
        ("tag", "reviewed", lambda r: "reviewed" in r.tags),
        ("untag", "old", lambda r: "old" not in r.tags),
    ],
)
def test_bulk_actions_on_a_selection(
    client: TestClient, engine: MemoryEngine, action: str, value: str, check: Any
) -> None:
    picked = [engine.store(f"picked {n}", tags=["old"]).record_id for n in range(2)]
    other = engine.store("other", tags=["old"]).record_id
    question, done = _confirm_and_apply(
        client, {"action": action, "value": value, "apply_to": "selected", "ids": picked}
    )
    assert "<strong>2</strong> memories" in question
    assert done.status_code == 303
    assert all(check(engine.get(rid)) for rid in picked)
    assert not check(engine.get(other))


def test_a_live_poll_leaves_the_message_for_the_page(
    client: TestClient, engine: MemoryEngine
) -> None:
    rid = engine.store("reinforce me").record_id
    client.post(f"/memories/{rid}/reinforce", data={"csrf": CSRF})
    assert "Reinforced" not in client.get("/live/feed?since=0").text
    assert "Reinforced" in client.get(f"/memories/{rid}").text
    assert "Reinforced" not in client.get(f"/memories/{rid}").text


def test_a_bulk_action_whose_count_changed_asks_again(
    client: TestClient, engine: MemoryEngine
) -> None:
    engine.store("one", tags=["t"])
    ask = client.post(
        "/memories/bulk", data={"csrf": CSRF, "action": "forget", "apply_to": "filter", "tags": "t"}
    )
    fields = hidden_fields(ask.text)
    engine.store("two", tags=["t"])
    again = client.post("/memories/bulk", data=form(fields))
    assert again.status_code == 200
    assert "changed since you asked: it is now 2" in again.text
    assert len(engine.match_ids()) == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"action": "explode", "apply_to": "filter"}, "choose an action"),
        ({"action": "move", "apply_to": "filter"}, "needs a scope"),
        ({"action": "tag", "apply_to": "selected", "value": "x"}, "no memory is selected"),
        ({"action": "forget", "apply_to": "elsewhere"}, "selected memories or to the filter"),
        (
            {"action": "move", "value": "Not A Scope!", "apply_to": "filter", "confirm": "yes"},
            "scope",
        ),
        ({"action": "forget", "apply_to": "filter", "min_strength": "x"}, "min strength"),
        ({"action": "forget", "ids": "nothex", "confirm": "yes", "expected": "1"}, "malformed"),
    ],
)
def test_a_bad_bulk_action_says_why_and_changes_nothing(
    client: TestClient, engine: MemoryEngine, data: dict[str, str], message: str
) -> None:
    engine.store("one", tags=["t"])
    before = state(engine)
    if data.get("confirm") == "yes" and "expected" not in data:
        data = {**data, "expected": "1"}
    answer = client.post("/memories/bulk", data={"csrf": CSRF, **data})
    assert answer.status_code == 400
    assert message in answer.text
    assert "Traceback" not in answer.text
    assert state(engine) == before


def test_a_memory_page_decodes_the_address_and_draws_the_decay(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    rid = engine.store("decoded", domain="decision", tags=["db", "ops"], importance=0.1).record_id
    engine.reinforce(rid)
    clock.advance(DAY)
    record = engine.get(rid)
    primes = engine.stats().registries
    page = client.get(f"/memories/{rid}").text
    assert f"prime {primes['domain']['decision']}" in page
    assert f"<code>{record.tag_product}</code>" in page
    factors = sorted((primes["tag"][t], t) for t in record.tags)
    spans = [f'<span class="factor">{p} <small>({t})</small></span>' for p, t in factors]
    shown = " \u00d7 ".join(spans)
    assert shown in page
    assert "does not match" not in page
    assert f'<strong class="strength-now">{engine.decay(rid).strength_now:.3f}</strong>' in page
    assert 'class="reinforced"' in page
    assert "Stored directly" in page


def test_editing_a_memory_saves_every_field(client: TestClient, engine: MemoryEngine) -> None:
    rid = engine.store("draft", tags=["a"]).record_id
    answer = client.post(
        f"/memories/{rid}/edit",
        data={
            "csrf": CSRF,
            "content": "final",
            "tags": "b, c",
            "importance": "0.9",
            "scope": "project:x",
        },
    )
    assert answer.status_code == 303
    record = engine.get(rid)
    assert (record.content, record.tags, record.importance, record.scope) == (
        "final",
        ("b", "c"),
        0.9,
        "project:x",
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"content": "  "}, "content is empty"),
        ({"importance": "lots"}, "importance must be a number"),
        ({"importance": "1.5"}, "importance"),
        ({"scope": "Bad Scope!"}, "scope"),
        ({"tags": "ok, a\x00b"}, "NUL character"),
    ],
)
def test_an_edit_that_breaks_a_rule_says_why_and_writes_nothing(
    client: TestClient, engine: MemoryEngine, fields: dict[str, str], message: str
) -> None:
    rid = engine.store("original", tags=["a"]).record_id
    before = state(engine)
    data = {"content": "changed too", "tags": "a", "importance": "0.5", "scope": "global"}
    answer = client.post(f"/memories/{rid}/edit", data={"csrf": CSRF, **data, **fields})
    assert answer.status_code == 400
    assert message in answer.text
    assert "changed too" in answer.text or fields.get("content") == "  "  # the form keeps input
    assert state(engine) == before


def test_reinforce_and_unfold_from_a_memory_page(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    ids = _foldable(engine, clock)
    report = engine.fold(keep_apart=ids["deploy"])
    (folded,) = report.created_ids
    page = client.get(f"/memories/{folded}").text
    assert all(f'href="/memories/{m}"' in page for m in ids["lint"])
    assert f'action="/memories/{folded}/unfold"' in page
    member = client.get(f"/memories/{ids['lint'][0]}").text
    assert f'Folded into <a href="/memories/{folded}">' in member
    assert f'action="/archive/{ids["lint"][0]}/restore"' in member
    assert client.post(f"/memories/{folded}/reinforce", data={"csrf": CSRF}).status_code == 303
    assert "Reinforced" in client.get(f"/memories/{folded}").text
    answer = client.post(f"/memories/{folded}/unfold", data={"csrf": CSRF})
    assert answer.status_code == 303
    assert set(ids["lint"]) <= set(engine.match_ids())
    assert folded not in engine.match_ids()


def test_fold_preview_untick_apply_and_undo(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    ids = _foldable(engine, clock)
    preview = client.get("/fold").text
    assert "Nothing has changed yet" in preview
    assert preview.count('name="merge"') == 2
    assert "Summary it would get" in preview
    assert "fell below" in preview
    assert len(engine.match_ids()) == 5
    fields = [(k, v) for k, v in hidden_fields(preview)]
    groups = [v for k, v in fields if k == "group"]
    keep = next(g for g in groups if g in ids["lint"])
    merged = [g for g in groups if g != keep]
    answer = client.post("/fold/apply", data=form([*fields, *(("merge", g) for g in merged)]))
    assert (answer.status_code, answer.headers["location"]) == (303, "/fold/result")
    live = set(engine.match_ids())
    assert set(ids["lint"]) <= live
    assert not live & set(ids["deploy"])
    assert ids["scratch"][0] not in live
    result = client.get("/fold/result").text
    assert "kept 1 group(s) apart" in result
    (folded,) = [rid for rid in live if rid not in ids["lint"]]
    assert f'action="/memories/{folded}/unfold"' in result
    undo = client.post(f"/memories/{folded}/unfold", data={"csrf": CSRF, "next": "/fold/result"})
    assert undo.headers["location"] == "/fold/result"
    assert set(ids["deploy"]) <= set(engine.match_ids())
    restore = client.post(
        f"/archive/{ids['scratch'][0]}/restore", data={"csrf": CSRF, "next": "/fold/result"}
    )
    assert restore.status_code == 303
    assert len(engine.match_ids()) == 5
    after = client.get("/fold/result").text
    assert "undone" in after and "restored" in after


def test_a_fold_form_without_its_preview_time_is_refused(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    _foldable(engine, clock)
    before = state(engine)
    for now in ("", "soon", "nan"):
        answer = client.post("/fold/apply", data={"csrf": CSRF, "now": now})
        assert answer.status_code == 400
        assert "preview time" in answer.text
    assert state(engine) == before


def test_the_archive_filters_restores_and_purges_after_confirmation(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    ids = _foldable(engine, clock)
    engine.fold()
    page = client.get("/archive").text
    assert "<strong>5</strong> archived memories match" in page
    pruned = client.get("/archive?reason=pruned").text
    assert "<strong>1</strong> archived memory match" in pruned
    assert "Scratch note" in pruned
    found = client.get("/archive?q=deploy").text
    assert "<strong>2</strong>" in found
    restore = client.post(
        f"/archive/{ids['scratch'][0]}/restore", data={"csrf": CSRF, "next": "/archive"}
    )
    assert restore.headers["location"] == "/archive"
    assert ids["scratch"][0] in engine.match_ids()
    ask = client.post("/archive/purge", data={"csrf": CSRF, "reason": "folded"})
    assert "Delete <strong>4</strong> archived memories (folded) for good?" in ask.text
    assert engine.archive_entries().total == 4
    done = client.post("/archive/purge", data=form(hidden_fields(ask.text)))
    assert done.status_code == 303
    assert engine.archive_entries().total == 0


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/archive?reason=lost", 400, "reason must be"),
        ("/archive?page=0", 400, "page must be"),
        ("/live/feed?since=then", 400, "since must be"),
        (f"/archive/{'0' * 32}/restore", 404, "no archived record"),
    ],
)
def test_bad_archive_and_live_requests_say_why(
    client: TestClient, path: str, status: int, message: str
) -> None:
    if path.endswith("/restore"):
        answer = client.post(path, data={"csrf": CSRF})
    else:
        answer = client.get(path)
    assert answer.status_code == status
    assert message in answer.text
    assert "Traceback" not in answer.text


def test_the_live_feed_shows_what_another_process_stored(
    client: TestClient, engine: MemoryEngine, store_path: Path, clock: FakeClock
) -> None:
    engine.store("already here")
    page = client.get("/live").text
    since = re.search(r'hx-get="/live/feed\?since=([^"]+)"', page)
    assert since is not None
    assert 'hx-trigger="every 2s"' in page
    clock.advance(5)
    with MemoryEngine(store_path, clock=clock) as other:
        other.store("stored by another process")
    feed = client.get(f"/live/feed?since={since.group(1)}").text
    assert "<html" not in feed
    new_rows = re.findall(r'<tr class="new">.*?</tr>', feed, flags=re.S)
    assert len(new_rows) == 1
    assert "stored by another process" in new_rows[0]
    assert '<strong id="live-total">2</strong>' in feed


# -- bad input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("min_strength=abc", "min strength must be a number from 0 to 1"),
        ("max_strength=2", "max strength must be a number from 0 to 1"),
        ("min_strength=0.8&max_strength=0.2", "is above max strength"),
        ("since=yesterday", "from date must be a date"),
        ("since=2026-02-01&until=2026-01-01", "after the to date"),
        ("order=sideways", "order must be one of"),
        ("page=0", "page must be from 1"),
        ("size=many", "page size must be a whole number"),
        ("scope=Not%20A%20Scope!", "scope"),
        ("tags=a%00b", "NUL character"),
    ],
)
def test_a_malformed_filter_gets_a_clear_message(
    client: TestClient, query: str, message: str
) -> None:
    answer = client.get(f"/memories?{query}")
    assert answer.status_code == 400
    assert message in answer.text
    assert "Traceback" not in answer.text
    assert 'id="filters"' in answer.text  # the form is there to fix it


def test_an_unknown_record_id_is_not_found(client: TestClient) -> None:
    answer = client.get(f"/memories/{'0' * 32}")
    assert answer.status_code == 404
    assert "never stored here" in answer.text


def test_a_malformed_record_id_is_a_bad_request(client: TestClient) -> None:
    answer = client.get("/memories/not-an-id")
    assert answer.status_code == 400
    assert "malformed" in answer.text
    posted = client.post("/memories/not-an-id/reinforce", data={"csrf": CSRF})
    assert posted.status_code == 400


def test_an_unknown_page_is_not_found(client: TestClient) -> None:
    answer = client.get("/nowhere")
    assert answer.status_code == 404
    assert "no page at this address" in answer.text


def test_an_unexpected_error_shows_a_page_without_a_traceback(
    client: TestClient, engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(engine, "stats", broken)
    quiet = TestClient(
        create_app(engine, Secrets(token=TOKEN, cookie="pmi", csrf=CSRF), ["testserver"]),
        raise_server_exceptions=False,
    )
    quiet.cookies.set("pmi", TOKEN)
    answer = quiet.get("/overview")
    assert answer.status_code == 500
    assert "RuntimeError" in answer.text
    assert "secret internals" not in answer.text
    assert "Traceback" not in answer.text
