"""The two user-facing commands, run for real as a user would."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.root, pytest.mark.bcc, pytest.mark.netns]


def prc_emu(*args):
    return subprocess.run([sys.executable, "-m", "cli.main", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_doctor_exits_0_and_reports_every_check():
    proc = prc_emu("doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [line.split("  ")[0] for line in proc.stdout.splitlines()]
    for check in ("root", "kernel", "bcc", "kernel headers", "PROG_TEST_RUN",
                  "XDP veth native", "XDP veth generic", "sch_fq", "sch_netem", "tshark"):
        assert any(n.startswith(check) for n in names), check
    assert proc.stdout.strip().endswith("doctor: all essentials work")


@pytest.mark.parametrize("mode", ["native", "generic"])
def test_demo_counts_every_packet_of_every_message(mode):
    proc = prc_emu("demo", "--xdp-mode", mode)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip().startswith("0x")]
    assert len(rows) == 4
    for _qp, sent, counted, sent_bytes, counted_bytes in rows:
        assert sent == counted and sent_bytes == counted_bytes
