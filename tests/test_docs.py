"""The README stays short and true: its commands are CI's, its figures name their commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_the_readme_is_short() -> None:
    assert len(README.splitlines()) <= 250


def test_the_quick_start_has_two_commands_and_ci_runs_both_then_the_slow_tests() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", _section("Quick start"), flags=re.S)
    assert len(blocks) == 2
    assert all(len(block.strip().splitlines()) == 1 for block in blocks)
    install_and_demo, tests = (block.strip() for block in blocks)
    # Each works with the system's own python3, which PEP 668 keeps pip out of: a venv first.
    venv = "python3 -m venv .venv && .venv/bin/pip install "
    assert install_and_demo.startswith(venv) and tests.startswith(venv)
    assert install_and_demo.endswith(".venv/bin/prime-memory demo")
    assert tests.endswith(".venv/bin/python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    # CI runs both commands as written (the first before anything else is installed),
    # then the tests the second leaves out (slow), in that venv.
    assert install_and_demo in ci and tests in ci
    assert ci.index(install_and_demo) < min(
        n for n, line in enumerate(ci) if line.startswith(". .venv/bin/activate")
    )
    slow = [n for n, line in enumerate(ci) if line.startswith(".venv/bin/python -m pytest -m slow")]
    assert slow and slow[0] > ci.index(tests)


def test_every_performance_row_names_its_command_and_date() -> None:
    rows = [
        line
        for line in _section("Performance").splitlines()
        if line.startswith("| ") and not line.startswith(("| comparison", "| ---"))
    ]
    assert 1 <= len(rows) <= 12
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert re.search(r"`python3 benchmarks/\w+\.py[^`]*`", cells[3]), row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", cells[4]), row
        script = re.search(r"benchmarks/(\w+\.py)", cells[3])
        assert script is not None and (ROOT / "benchmarks" / script.group(1)).is_file(), row


@pytest.mark.parametrize(
    "doc", sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "CHANGELOG.md"])
)
def test_relative_links_lead_to_files(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"
