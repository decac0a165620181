"""Small git repositories for the tests of citations.

``git`` runs git with a fixed identity and no signing, whatever the machine's
configuration; ``make_repo`` writes files into a new repository and commits
them once.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

GIT = (
    "git",
    "-c",
    "user.name=Test",
    "-c",
    "user.email=test@example.com",
    "-c",
    "commit.gpgsign=false",
)
#: Thirty numbered lines: the file most tests cite lines of.
CLIENT = "".join(f"line {n}\n" for n in range(1, 31))


def git(repo: Path, *args: str) -> str:
    """git run in ``repo``; what it printed."""
    return subprocess.run(
        [*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def make_repo(root: Path, files: Mapping[str, str]) -> Path:
    """A new git repository at ``root`` holding ``files`` (path: text), committed."""
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root
