"""The inspector's memory page: citations, the validity chain and possible supersessions."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from prime_memory_folding import MemoryEngine
from prime_memory_folding.web import Secrets, create_app
from tests.conftest import FakeClock
from tests.git_repos import CLIENT, git, make_repo

TOKEN = "inspector-test-token-0123456789"
CSRF = "csrf-test-token-9876543210"
DAY = 86_400.0
XSS = "<script>alert('owned')</script>"
DB = '''import sqlite3


def connect(path):
    """Open the store."""
    return sqlite3.connect(path)
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"src/client.py": CLIENT, "src/db.py": DB, "README.md": "# Project\n\nHow to run it.\n"}
    return make_repo(tmp_path / "project", files)


@pytest.fixture
def client(engine: MemoryEngine) -> Iterator[TestClient]:
    keys = Secrets(token=TOKEN, cookie="pmi", csrf=CSRF)
    with TestClient(create_app(engine, keys, ["testserver"]), follow_redirects=False) as c:
        c.cookies.set("pmi", TOKEN)
        yield c


def section(page: str, heading_id: str) -> str:
    """The text of one ``<section>`` of a page, found by its heading's id."""
    start = page.index(f'id="{heading_id}"')
    return page[start : page.index("</section>", start)]


def rows(part: str) -> list[str]:
    """Each table row of a section, its tags dropped and its spaces folded."""
    found = re.findall(r"<tr[^>]*>(.*?)</tr>", part, flags=re.S)
    return [text(r) for r in found[1:]]


def text(part: str) -> str:
    """What a piece of a page reads as: its tags dropped, its spaces folded."""
    words = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", part)).split())
    return re.sub(r" ([:;,)])", r"\1", words)


def citation_rows(client: TestClient, rid: str) -> list[str]:
    page = client.get(f"/memories/{rid}")
    assert page.status_code == 200
    return rows(section(page.text, "citations"))


def lines_cited(engine: MemoryEngine, repo: Path, text: str = "the client retries") -> str:
    cites = [{"path": "src/client.py", "lines": "10-12"}]
    return engine.store(text, cites=cites, repo=repo).record_id


# -- citations --------------------------------------------------------------------


def test_verified_citations_show_what_was_cited_its_state_and_commit(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    cites = [
        {"path": "src/client.py", "lines": "10-12"},
        {"path": "src/db.py", "symbol": "connect"},
        {"path": "README.md"},
    ]
    rid = engine.store("how the client connects", cites=cites, repo=repo).record_id
    page = client.get(f"/memories/{rid}").text
    assert 'class="cite-state cite-verified"' in page
    assert f'title="{head}"' in page
    found = rows(section(page, "citations"))
    assert len(found) == 3
    assert found[0].startswith("src/client.py lines 10-12 ✓ verified")
    assert head[:12] in found[0]
    assert found[1].startswith("src/db.py symbol connect ✓ verified")
    assert found[2].startswith("README.md (the whole file) ✓ verified")


def test_a_memory_citing_nothing_has_no_citations_section(
    client: TestClient, engine: MemoryEngine
) -> None:
    rid = engine.store("no code here").record_id
    assert 'id="citations"' not in client.get(f"/memories/{rid}").text


def test_moved_lines_show_where_they_are_now(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    rid = lines_cited(engine, repo)
    (repo / "src" / "client.py").write_text("new 1\nnew 2\nnew 3\n" + CLIENT)
    (row,) = citation_rows(client, rid)
    assert "→ moved" in row
    assert "now lines 13-15" in row


def test_edited_lines_are_stale_with_the_reason(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    rid = lines_cited(engine, repo)
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 11\n", "line eleven\n"))
    page = client.get(f"/memories/{rid}").text
    assert 'class="cite-state cite-stale"' in page
    (row,) = rows(section(page, "citations"))
    assert "✗ stale" in row
    assert "the cited lines changed" in row


def test_a_deleted_file_is_stale(client: TestClient, engine: MemoryEngine, repo: Path) -> None:
    rid = lines_cited(engine, repo)
    (repo / "src" / "client.py").unlink()
    (row,) = citation_rows(client, rid)
    assert "✗ stale" in row
    assert "src/client.py is gone from the working tree" in row


def test_a_file_renamed_with_git_mv_is_followed(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    rid = lines_cited(engine, repo)
    git(repo, "mv", "src/client.py", "src/http_client.py")
    (row,) = citation_rows(client, rid)
    assert row.startswith("src/client.py lines 10-12 → moved")
    assert "now src/http_client.py lines 10-12" in row
    assert "renamed to src/http_client.py" in row


def test_a_repository_gone_from_this_machine_is_unchecked(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    rid = lines_cited(engine, repo)
    git(repo, "rev-parse", "HEAD")
    (repo / ".git").rename(repo / "git-elsewhere")
    (row,) = citation_rows(client, rid)
    assert "? unchecked" in row
    assert "the repository is not on this machine" in row


def test_the_page_checks_again_when_it_is_rendered(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    rid = lines_cited(engine, repo)
    assert "✓ verified" in citation_rows(client, rid)[0]
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 10\n", "line ten\n"))
    assert "✗ stale" in citation_rows(client, rid)[0]
    (repo / "src" / "client.py").write_text(CLIENT)
    assert "✓ verified" in citation_rows(client, rid)[0]


def test_an_archived_memory_shows_its_citations_checked_now(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    rid = lines_cited(engine, repo)
    engine.archive([rid])
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 12\n", "line twelve\n"))
    page = client.get(f"/memories/{rid}").text
    assert "In the archive since" in page
    (row,) = rows(section(page, "citations"))
    assert "✗ stale" in row


def test_the_memories_list_marks_hits_with_stale_code(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    stale = lines_cited(engine, repo, "the client retries with backoff")
    fresh = engine.store(
        "the client connects with backoff",
        cites=[{"path": "src/db.py", "symbol": "connect"}],
        repo=repo,
    ).record_id
    plain = engine.store("the client logs with backoff").record_id
    (repo / "src" / "client.py").write_text(CLIENT.replace("line 11\n", "line eleven\n"))
    for path in ("/memories?q=backoff", "/memories", "/memories?q=backoff&order=newest"):
        page = client.get(path).text
        marked = {
            rid
            for rid in (stale, fresh, plain)
            if re.search(
                rf'href="/memories/{rid}">[^<]*</a> <span class="cite-state cite-stale"', page
            )
        }
        assert marked == {stale}, path
    fragment = client.get("/memories?q=backoff", headers={"hx-target": "results"}).text
    assert "stale code" in fragment


def test_a_cited_path_and_the_content_are_escaped(
    client: TestClient, engine: MemoryEngine, repo: Path
) -> None:
    name = "<img src=x onerror=alert(1)>.py"
    (repo / name).write_text("print('hi')\n")
    rid = engine.store(XSS, cites=[{"path": name, "lines": "1"}], repo=repo).record_id
    (repo / name).unlink()
    page = client.get(f"/memories/{rid}").text
    assert "<img src=x" not in page
    assert "<script>alert" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;.py is gone" in page
    assert "&lt;script&gt;alert(" in page
    listing = client.get("/memories?q=alert").text
    assert "<script>alert" not in listing


# -- the validity chain -----------------------------------------------------------


def test_a_memory_never_superseded_has_no_chain(client: TestClient, engine: MemoryEngine) -> None:
    rid = engine.store("the retry limit is 15").record_id
    assert 'id="validity-chain"' not in client.get(f"/memories/{rid}").text


def test_the_chain_shows_predecessors_and_successors_with_links(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    first = engine.store("The retry limit is 15").record_id
    clock.advance(DAY)
    second = engine.store("The retry limit is 16", supersedes=first).record_id
    clock.advance(DAY)
    third = engine.store("The retry limit is 17", supersedes=second).record_id

    page = client.get(f"/memories/{second}").text
    assert "In the archive since" in page
    assert f'Its successor: <a href="/memories/{third}">' in page
    chain = section(page, "validity-chain")
    assert "3 versions, oldest first" in chain
    assert f'href="/memories/{first}"' in chain
    assert f'href="/memories/{third}"' in chain
    assert f'href="/memories/{second}"' not in chain
    assert 'aria-current="true"' in chain
    earlier, current, later = rows(chain)
    assert earlier.startswith("The retry limit is 15 (earlier)")
    assert "superseded" in earlier
    assert current.startswith("this version: The retry limit is 16")
    assert "15 -> 16" in current
    assert later.startswith("The retry limit is 17 (later)")
    assert "live" in later
    assert "16 -> 17" in later
    assert later.split(" (later) ")[1].split(" live")[0].endswith("now")

    newest = rows(section(client.get(f"/memories/{third}").text, "validity-chain"))
    assert [r.split(":")[0] if r.startswith("this") else r.split(" (")[0] for r in newest] == [
        "The retry limit is 15",
        "The retry limit is 16",
        "this version",
    ]
    oldest = section(client.get(f"/memories/{first}").text, "validity-chain")
    assert f'href="/memories/{second}"' in oldest
    assert f'href="/memories/{third}"' in oldest


def test_an_update_shows_in_the_chain_as_an_earlier_version(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    rid = engine.store("The build takes 4 minutes").record_id
    clock.advance(DAY)
    engine.update(rid, content="The build takes 6 minutes")
    chain = section(client.get(f"/memories/{rid}").text, "validity-chain")
    before, current = rows(chain)
    assert "(this memory before an update)" in before
    assert "replaced" in before
    assert current.startswith("this version: The build takes 6 minutes")
    assert f'href="/memories/{rid}"' not in chain


def test_the_chain_escapes_content(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    first = engine.store(f"{XSS} limit 1").record_id
    clock.advance(DAY)
    second = engine.store(f"{XSS} limit 2", supersedes=first).record_id
    for rid in (first, second):
        page = client.get(f"/memories/{rid}").text
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(" in section(page, "validity-chain")


# -- possible supersessions -------------------------------------------------------


def test_possibly_supersedes_names_the_older_memory_with_a_link(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    old = engine.store("The retry limit is 15").record_id
    clock.advance(DAY)
    new = engine.store("The retry limit is 16")
    (hint,) = engine.possibly_supersedes(new.record_id)
    assert hint.record.record_id == old
    part = section(client.get(f"/memories/{new.record_id}").text, "possibly-supersedes")
    assert f'href="/memories/{old}"' in part
    assert f"possibly supersedes {old} ({hint.change})" in text(part)
    assert "supersedes=" in text(part)
    assert 'id="possibly-supersedes"' not in client.get(f"/memories/{old}").text


def test_possibly_supersedes_is_escaped(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    engine.store(f"The {XSS} limit is 15")
    clock.advance(DAY)
    new = engine.store(f"The {XSS} limit is 16").record_id
    page = client.get(f"/memories/{new}").text
    assert "<script>alert" not in page
    assert 'id="possibly-supersedes"' in page
    # A caller's metadata cannot make the page claim one: the engine compares texts.
    hostile = [{"id": 'x"><script>alert(1)</script>', "change": XSS}]
    rid = engine.store("hand-written hints", metadata={"possibly_supersedes": hostile}).record_id
    page = client.get(f"/memories/{rid}").text
    assert "<script>alert" not in page and 'id="possibly-supersedes"' not in page


# -- the archive ------------------------------------------------------------------


def test_the_archive_filters_and_labels_superseded_memories(
    client: TestClient, engine: MemoryEngine, clock: FakeClock
) -> None:
    old = engine.store("The retry limit is 15").record_id
    clock.advance(DAY)
    new = engine.store("The retry limit is 16", supersedes=old).record_id
    engine.store("a note to forget")
    engine.archive([engine.query(text="forget")[0].record.record_id])
    page = client.get("/archive").text
    for reason in ("pruned", "forgotten", "folded", "replaced", "superseded", "stale"):
        assert f'<option value="{reason}"' in page
    superseded = client.get("/archive?reason=superseded").text
    assert "<strong>1</strong> archived memory match" in superseded
    assert "The retry limit is 15" in superseded
    assert "a note to forget" not in superseded
    assert f'; successor <a href="/memories/{new}">' in superseded
    assert client.get("/archive?reason=stale").status_code == 200
    ask = client.post("/archive/purge", data={"csrf": CSRF, "reason": "superseded"})
    assert "Delete <strong>1</strong> archived memory (superseded) for good?" in ask.text


# -- folds that archive stale memories --------------------------------------------


def test_the_fold_pages_list_unused_memories_whose_code_changed(
    client: TestClient, engine: MemoryEngine, clock: FakeClock, repo: Path
) -> None:
    rid = engine.store(
        "Lines 3 to 5 of the client set up retries",
        cites=[{"path": "src/client.py", "lines": "3-5"}],
        repo=repo,
        importance=0.9,
    ).record_id
    (repo / "src" / "client.py").write_text("rewritten\n")
    clock.advance(29 * DAY)
    preview = client.get("/fold").text
    part = preview[preview.index("Would be archived as stale") :]
    assert f'href="/memories/{rid}"' in part and "src/client.py" in html.unescape(part)
    assert "1 unused memories whose cited code changed" in preview
    answer = client.post("/fold/apply", data={"csrf": CSRF, "now": str(clock.now)})
    assert answer.status_code == 303
    result = client.get("/fold/result").text
    assert "Archived as stale" in result and "and 1 whose cited code changed" in result
    assert f'action="/archive/{rid}/restore"' in result
    assert engine.archive_entries(reason="stale").entries[0].record.record_id == rid
