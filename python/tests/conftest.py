"""Shared fixtures: the `recsel` command-line binary the Python results are compared with.

The binary is `$RECSEL_BIN`, else `$CARGO_TARGET_DIR/release/recsel`, else the repository's
`target/release/recsel`, else `recsel` on PATH. Without it the comparisons are skipped with a
visible reason — except under CI (`CI` set), where a missing prerequisite fails the run.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _find_binary():
    cands = []
    if os.environ.get("RECSEL_BIN"):
        cands.append(Path(os.environ["RECSEL_BIN"]))
    if os.environ.get("CARGO_TARGET_DIR"):
        cands.append(Path(os.environ["CARGO_TARGET_DIR"]) / "release" / "recsel")
    cands.append(REPO / "target" / "release" / "recsel")
    which = shutil.which("recsel")
    if which:
        cands.append(Path(which))
    for c in cands:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def missing(what):
    """Fail under CI, skip visibly otherwise."""
    if os.environ.get("CI"):
        pytest.fail(f"missing prerequisite under CI: {what}")
    pytest.skip(f"SKIPPED: {what}")


@pytest.fixture(scope="session")
def recsel_bin():
    b = _find_binary()
    if b is None:
        missing("the recsel binary (build it with `cargo build --release`, or set RECSEL_BIN)")
    return b


@pytest.fixture(scope="session")
def run_cli(recsel_bin):
    def run(*args, check=True):
        p = subprocess.run([str(recsel_bin), *map(str, args)], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"recsel {' '.join(map(str, args))} failed:\n{p.stderr}")
        return p

    return run
