"""A test that needs a missing tool skips on a workstation and fails on CI.

The node-marked tests need Node, and the Inspector and conformance tests Node 22
with both tools (``scripts/install_node22.sh``). CI installs them, so there a
missing tool must fail the run rather than let it pass with the tests skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NODE_TESTS = [
    "test_inspector_lists_the_tools",
    "test_inspector_calls_a_tool",
    "test_conformance_suite_passes_but_for_listed_fixture_scenarios",
    "test_launcher_passes_stdio_through",
]


def run_node_tests(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    """The node tests on a machine without Node: an empty tool folder and a PATH without node."""
    bare_path = tmp_path / "bin"
    bare_path.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PRIME_MEMORY_NODE_HOME=str(tmp_path / "no-node"), PATH=str(bare_path))
    if ci:
        env["CI"] = "true"
    selected = " or ".join(NODE_TESTS)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_mcp_node.py", "-k", selected,
         "-p", "no:cacheprovider", "-q", "-rfEs", "--no-header", "-n", "0"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip


# A pytest run in a subprocess for each case: CI's failing one in the default run.
@pytest.mark.slow
def test_without_ci_the_node_tests_skip_and_say_why(tmp_path: Path) -> None:
    done = run_node_tests(tmp_path, ci=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(NODE_TESTS)} skipped" in done.stdout
    assert "Node >= 22 not found" in done.stdout and "Node >= 18 is not on PATH" in done.stdout


def test_on_ci_the_node_tests_fail_instead_of_skipping(tmp_path: Path) -> None:
    done = run_node_tests(tmp_path, ci=True)
    assert done.returncode == 1, done.stdout + done.stderr
    # The launcher test needs node through a fixture, so pytest counts it an error.
    assert "3 failed, 4 deselected, 1 error" in done.stdout and "skipped" not in done.stdout
    for name in NODE_TESTS[:3]:
        assert f"FAILED tests/test_mcp_node.py::{name}" in done.stdout
    assert f"ERROR tests/test_mcp_node.py::{NODE_TESTS[3]}" in done.stdout
    assert "Node >= 22 not found" in done.stdout and "Node >= 18 is not on PATH" in done.stdout
    assert "CI is set, so this test must run, not skip" in done.stdout


def node_step_of_ci_run(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    """``.ci/run``'s Node step alone, as it runs there, with an npm that always fails."""
    script = (ROOT / ".ci" / "run").read_text()
    start = script.index('echo "--- Node 22')
    step = script[start : script.index('echo "--- tests"', start)]
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (fake / "npm").write_text('#!/bin/sh\necho "npm: registry unreachable" >&2\nexit 1\n')
    (fake / "npm").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(
        PATH=f"{fake}{os.pathsep}{env.get('PATH', '')}",
        PRIME_MEMORY_NODE_HOME=str(tmp_path / "node-home"),
    )
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{step}\necho 'went on to the tests'"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=60,
    )  # fmt: skip


def test_ci_run_stops_when_the_node_tools_fail_to_install_on_ci(tmp_path: Path) -> None:
    done = node_step_of_ci_run(tmp_path, ci=True)
    assert done.returncode == 1
    assert "went on to the tests" not in done.stdout
    assert "install_node22.sh failed; CI must run the node-marked tests" in done.stderr


# Off CI the step goes on into the release build that follows it: a wheel, a
# virtual environment and an install, tens of seconds.
@pytest.mark.slow
def test_ci_run_goes_on_without_the_node_tools_off_ci(tmp_path: Path) -> None:
    done = node_step_of_ci_run(tmp_path, ci=False)
    assert done.returncode == 0, done.stderr
    assert "went on to the tests" in done.stdout
    assert "the node-marked tests will skip" in done.stderr
