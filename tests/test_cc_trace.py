"""`prc-emu cc trace`: a table of rate and alpha per event, and a plot."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def cc_trace(*args):
    return subprocess.run([sys.executable, "-m", "cli.main", "cc", "trace", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_trace_prints_one_row_per_event_and_writes_a_png(tmp_path):
    csv = tmp_path / "events.csv"
    csv.write_text("time_us,event,bytes,weight\n0,cnp,,\n300,advance,,\n600,tx,4096,\n900,advance,,2\n")
    proc = cc_trace(str(csv), "--param", "rpg_byte_reset=0")
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[1:] if line.strip()[:1].isdigit()]
    assert [r[1] for r in rows] == ["cnp", "advance", "tx", "advance"]
    rates = [float(r[2]) for r in rows]
    assert rates[0] == pytest.approx(100 * (1 - 1023 / 2048), abs=0.01)     # the first cut
    assert rates[0] < rates[1] < rates[2] < rates[3]                       # recovering
    assert (tmp_path / "events.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("content,extra,message", [
    ("time_us,kind\n0,cnp\n", [], "missing column 'event'"),
    ("time_us,event,colour\n0,cnp,red\n", [], "unknown column 'colour'"),
    ("time_us,event\n0,boom\n", [], ":2: event must be one of"),
    ("time_us,event\n5,cnp\n4,cnp\n", [], ":3: time_us must be >= 0 and never decrease"),
    ("time_us,event\nsoon,cnp\n", [], "time_us must be a number"),
    ("time_us,event\n0,cnp\n", ["--param", "rpg_threshold=0"], "rpg_threshold: must be 1..31"),
    ("time_us,event\n0,cnp\n", ["--param", "speed=9"], "--param 'speed=9'"),
    ("time_us,event\n", [], "no events"),
])
def test_bad_input_exits_2_with_one_line_and_writes_no_plot(tmp_path, content, extra, message):
    csv = tmp_path / "events.csv"
    csv.write_text(content)
    proc = cc_trace(str(csv), *extra)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.csv"]
