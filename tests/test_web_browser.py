"""The inspector in a real browser: Debian's headless Chromium, driven by Playwright.

One browser session walks every step a person takes: refused without the
token, open the printed address, search by text and by tag, open and edit a
memory, preview a fold, untick a group, apply, undo a group, restore from the
archive, forget by a filter, and watch a memory that an MCP server stores
appear live. A screenshot of each page lands in the test's temporary folder.

Without Chromium (or Playwright) the test skips, except under CI, where it fails.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prime_memory_folding import MemoryEngine
from tests.conftest import FakeClock
from tests.inspector_process import InspectorProcess
from tests.stdio_client import StdioServer

pytestmark = pytest.mark.browser

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 20_000
DAY = 86_400.0


def _chromium(where: tuple[str, ...] = ("/usr/bin/chromium",)) -> str:
    found = shutil.which("chromium") or next((p for p in where if Path(p).exists()), None)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        found = None
    if found is None:
        reason = "needs Debian's chromium and Playwright for Python (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, and the browser test {reason}")
        pytest.skip(reason)
    return found


@pytest.mark.parametrize(("ci", "outcome"), [("true", "fail"), ("", "skip")])
def test_without_chromium_the_browser_test_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: str
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match="chromium"):
        _chromium(where=())


@pytest.fixture
def seeded(store_path: Path) -> Path:
    """A store a month old: two groups that fold, a note that decayed, three temporary notes."""
    clock = FakeClock(time.time() - 30 * DAY)
    with MemoryEngine(store_path, clock=clock) as engine:
        for text, vector in (
            ("Run make lint before pushing; CI fails on any warning.", [1.0, 0.0, 0.0]),
            ("Run make lint before you push; CI fails on any warning.", [0.99, 0.1, 0.0]),
        ):
            engine.store(text, subdomain="procedural", tags=["lint"], vector=vector)
        for text, vector in (
            ("Deploy with make release after the tag is pushed.", [0.0, 1.0, 0.0]),
            ("Deploy with make release once the tag is pushed.", [0.1, 0.99, 0.0]),
        ):
            engine.store(text, subdomain="procedural", tags=["deploy"], vector=vector)
        engine.store("Scratch note from a long-gone debugging session", importance=0.1)
        engine.store(
            "The database is SQLite in WAL mode",
            domain="decision",
            tags=["architecture"],
            importance=0.8,
            vector=[0.0, 0.0, 1.0],
        )
        for n in range(3):
            engine.store(f"Temporary note {n} <script>alert({n})</script>", tags=["temp"])
    return store_path


@pytest.fixture
def inspector(seeded: Path) -> Iterator[InspectorProcess]:
    process = InspectorProcess(seeded)
    try:
        yield process
    finally:
        process.close()


def _flash(page: Any) -> str:
    return str(page.locator("p.flash").inner_text(timeout=WAIT_MS))


# Chromium, the inspector and a stdio server for several seconds: slow. The
# default run keeps the pages (test_web.py) and the real inspector (test_web_cli.py).
@pytest.mark.slow
def test_a_person_walks_through_the_inspector(
    inspector: InspectorProcess, seeded: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    chromium = _chromium()
    expect.set_options(timeout=WAIT_MS)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    taken: list[str] = []

    def shot(page: Any, name: str) -> None:
        path = shots / f"{len(taken) + 1:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        taken.append(path.name)

    base = inspector.base
    with sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            context.set_default_timeout(WAIT_MS)
            page = context.new_page()
            dialogs: list[str] = []

            def dismiss(dialog: Any) -> None:  # a script that ran would open one
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", dismiss)
            errors: list[str] = []  # script errors, and anything the CSP blocked
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

            # Refused without the token.
            answer = page.goto(base + "/memories")
            assert answer is not None and answer.status == 403
            expect(page.locator("h1")).to_have_text("Token needed")
            shot(page, "refused")
            errors.clear()  # the refusal's 403 is logged; nothing else may be

            # Open the printed address: the token becomes a cookie, and leaves the URL.
            page.goto(inspector.url)
            assert page.url == base + "/overview"
            expect(page.locator("#record-count")).to_have_text("9")
            assert "token" not in page.url
            shot(page, "overview")

            # Search by text, live as one types (htmx), then by tag.
            page.goto(base + "/memories")
            page.fill("input[name=q]", "database")
            rows = page.locator("table.memories tbody tr")
            expect(rows).to_have_count(1)
            expect(rows.first).to_contain_text("The database is SQLite")
            expect(page.locator("table.memories thead")).to_contain_text("Score parts")
            assert "q=database" in page.url
            shot(page, "memories-text")
            page.fill("input[name=q]", "")
            page.fill("input[name=tags]", "temp")
            expect(rows).to_have_count(3)
            expect(rows.first).to_contain_text("<script>alert(")  # shown as text
            assert dialogs == []
            shot(page, "memories-tag")

            # Open a memory and edit it.
            page.fill("input[name=tags]", "")
            page.fill("input[name=q]", "database")
            expect(rows).to_have_count(1)
            rows.first.locator("a").click()
            expect(page.locator("pre.memory-content")).to_have_text(
                "The database is SQLite in WAL mode"
            )
            expect(page.locator("svg.chart")).to_have_count(1)
            edited = "The database is SQLite in WAL mode, checked nightly"
            page.fill("textarea[name=content]", edited)
            page.fill("input[name=tags]", "architecture, storage")
            page.click("form.edit button[type=submit]")
            assert _flash(page).startswith("Saved: content, tags changed")
            expect(page.locator("pre.memory-content")).to_have_text(edited)
            shot(page, "memory")

            # Preview a fold, untick the lint group, apply, and undo the other group.
            page.goto(base + "/fold")
            groups = page.locator("fieldset.group")
            expect(groups).to_have_count(2)
            expect(page.locator("main")).to_contain_text("Scratch note")
            shot(page, "fold-preview")
            lint = groups.filter(has_text="make lint")
            lint.locator("input[name=merge]").uncheck()
            page.click("text=Apply the fold")
            assert page.url == base + "/fold/result"
            assert "kept 1 group(s) apart" in _flash(page)
            shot(page, "fold-result")
            page.click("button:has-text('Unfold')")
            assert _flash(page) == "Unfolded into 2 memories again."
            expect(page.locator("main")).to_contain_text("undone")

            # Restore the decayed note from the archive.
            page.goto(base + "/archive")
            shot(page, "archive")
            row = page.locator("table.archive tbody tr").filter(has_text="Scratch note")
            row.locator("button:has-text('Restore')").click()
            assert _flash(page) == "Restored from the archive."

            # Forget every temporary note by a filter, after confirming the count.
            page.goto(base + "/memories?tags=temp")
            expect(rows).to_have_count(3)
            page.check("input[name=apply_to][value=filter]")
            page.select_option("select[name=action]", "forget")
            page.click("text=Review…")
            expect(page.locator(".confirm-question")).to_contain_text("Forget 3 memories")
            shot(page, "confirm")
            page.click("text=Yes, forget 3")
            assert _flash(page).startswith("Forgot 3 memories into the archive")
            expect(page.locator("#match-count")).to_have_text("0")

            # A memory stored through MCP by another process appears without a reload.
            page.goto(base + "/live")
            expect(page.locator("#live-total")).to_have_text("6")
            agent = StdioServer(seeded)
            try:
                agent.handshake()
                stored = agent.call(
                    "prime_memory_store",
                    {"content": "Stored by an agent over MCP", "tags": ["live"]},
                )
                assert stored["isError"] is False
            finally:
                agent.close()
            fresh = page.locator("tr.new", has_text="Stored by an agent over MCP")
            expect(fresh).to_have_count(1)
            expect(page.locator("#live-total")).to_have_text("7")
            shot(page, "live")
            assert errors == []
        finally:
            context.close()

    assert len(taken) == 10
    assert all((shots / name).stat().st_size > 5_000 for name in taken)
    with MemoryEngine(seeded) as engine:
        # The lint group was kept apart and the deploy group unfolded: nothing stays folded.
        assert engine.archive_entries(reason="folded").total == 0
        assert len(engine.match_ids(tags=["lint"])) == 2
        assert len(engine.match_ids(tags=["temp"])) == 0
        assert engine.match_ids(tags=["storage"]) != []
