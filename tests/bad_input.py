"""Checks shared by the tests of bad input: the error names the key and
the reason on one line; the command line exits 2 and leaves nothing."""
import subprocess
import sys
from pathlib import Path

import pytest

from scenario.errors import ScenarioError

REPO = Path(__file__).resolve().parent.parent


def assert_names_key(parse, key: str, reason: str) -> None:
    """parse() raises a one-line ScenarioError starting `key:` that says reason."""
    with pytest.raises(ScenarioError) as err:
        parse()
    message = str(err.value)
    assert message.startswith(key + ":") and reason in message and "\n" not in message


def cli_rejects(args: list[str], tmp_path, state_dir: bool = True) -> str:
    """`prc-emu ARGS` with results (and testbed state, if the command takes
    --state-dir) under tmp_path exits 2 with one line on stderr and creates
    neither: that line."""
    results, state = tmp_path / "results", tmp_path / "state"
    places = ["--results", str(results)] + (["--state-dir", str(state)] if state_dir else [])
    proc = subprocess.run([sys.executable, "-m", "cli.main", *args, *places],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert not results.exists() and not state.exists()
    return lines[0]
