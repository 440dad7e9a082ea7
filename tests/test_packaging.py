import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["scenario", "dataplane", "testbed", "control", "experiment", "cli"])
def test_top_level_packages_resolve_to_this_repository(name):
    # PyPI has unrelated distributions with these names; ours must win.
    module = __import__(name)
    assert Path(module.__file__).resolve().parent == REPO / name


def test_unknown_command_exits_2_with_one_line():
    proc = subprocess.run([sys.executable, "-m", "cli.main", "no-such-command"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-command" in lines[0]


def test_missing_command_exits_2_with_one_line():
    proc = subprocess.run([sys.executable, "-m", "cli.main"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.bcc
@pytest.mark.root
def test_qp_counters_mirror_matches_the_compiled_struct(roce_count):
    from dataplane.layout import ctypes_fields
    from dataplane.shared import QpCounters

    bpf, _ = roce_count
    leaf = bpf["qp_counters"].Leaf
    assert ctypes_fields(leaf) == ctypes_fields(QpCounters)
