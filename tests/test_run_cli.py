"""`prc-emu run` as a user runs it: a live experiment into a results
folder, or nothing at all."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.isolated import run_sandboxed

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.root, pytest.mark.bcc, pytest.mark.netns]
SHORT = """name = "short"
[traffic]
duration_s = 3.0
settle_s = 1.0
"""


def _cli_run(tmp: str, scenario_text: str, stop_after_s: float | None = None, extra: tuple = ()) -> dict:
    from pyroute2 import netns

    scenario = Path(tmp) / "scenario.toml"
    scenario.write_text(scenario_text)
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "run", str(scenario), "--results",
                             tmp + "/results", "--state-dir", tmp + "/state", *extra], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if stop_after_s is not None:
        time.sleep(stop_after_s)
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    results = Path(tmp) / "results"
    return {"rc": proc.returncode, "out": out, "err": err, "netns": netns.listnetns(),
            "entries": sorted(p.name for p in results.iterdir()) if results.exists() else []}


def test_run_writes_a_complete_results_folder(tmp_path):
    from scapy.utils import rdpcap

    from dataplane import roce

    r = run_sandboxed(_cli_run, str(tmp_path), SHORT, None, ("--capture", "s0:h2"), timeout_s=300)
    assert r["rc"] == 0, r["out"] + r["err"]
    assert r["netns"] == [] and len(r["entries"]) == 1
    folder = tmp_path / "results" / r["entries"][0]
    assert sorted(p.name for p in folder.iterdir()) == [
        "capture-s0-h2.pcap", "config.json", "flows.csv", "queues.csv", "rates.png", "summary.json",
        "versions.json"]
    summary = json.loads((folder / "summary.json").read_text())
    # the capture: data to h2 and CNPs back, every ICRC valid
    frames = [bytes(p) for p in rdpcap(str(folder / "capture-s0-h2.pcap"))]
    assert summary["captures"] == {"capture-s0-h2.pcap": {"frames": len(frames), "dropped": 0}}
    assert len(frames) >= 1000
    opcodes = {roce.parse(f).opcode for f in frames}
    assert roce.CNP in opcodes and roce.WRITE_MIDDLE in opcodes
    assert all(roce.icrc_valid(f) for f in frames)
    _capture_is_whole_and_timed(rdpcap(str(folder / "capture-s0-h2.pcap")), summary)
    assert summary["valid"] and len(summary["flows"]) == 2
    assert summary["pacer"].startswith("cooperative") and "early packets: 0" in summary["pacer"]
    # Measured in 6 runs: 0.92-0.98 of line in all, 0.42-0.56 a flow; in 1
    # a start-up overshoot to Xoff began a cycle of pauses (test_live_dcqcn)
    # and the flows took 0.39 and 0.37. What holds in every run: they
    # share evenly and use most of the link.
    assert all(0.3 <= f["share_of_line"] <= 0.65 for f in summary["flows"])
    assert summary["total_share_of_line"] >= 0.65
    assert summary["jain_fairness"] > 0.95
    assert (summary["pauses"] == 0) == (summary["paused_ms"] == 0)      # lossless by default
    assert summary["retransmits"] == sum(f["retransmits"] for f in summary["flows"])
    assert summary["pauses"] == sum(q["pauses"] for q in summary["switch_queues"].values())
    rows = (folder / "flows.csv").read_text().splitlines()
    assert rows[0] == "time_s,flow,delivered_mbps,bpf_rate_mbps,alpha,cnps,ce_marks" and len(rows) > 400
    last = rows[-1].split(",")
    assert 0 <= float(last[4]) <= 1 and int(last[5]) > 0 and int(last[6]) > 0
    assert json.loads((folder / "versions.json").read_text())["kernel"]
    assert (folder / "rates.png").read_bytes()[:4] == b"\x89PNG"


def _capture_is_whole_and_timed(packets, summary):
    """Only the port's frames (data to h2, CNPs from it), every PSN of each
    QP between its first and last, and kernel times: the capture spans
    what was asked, and data frames leave the saturated port one
    serialisation time apart."""
    import numpy as np

    from dataplane import roce

    import socket
    import tomllib

    from scenario.spec import parse_scenario
    from testbed.topology import plan_topology

    h2 = socket.inet_aton(plan_topology(parse_scenario(tomllib.loads(SHORT)), "p0001").host_addr("h2"))
    parsed = [(float(p.time), roce.parse(bytes(p)), len(p)) for p in packets]
    data = [(t, f, n) for t, f, n in parsed if f.opcode <= 0x0B]
    assert all(f.dst_ip == h2 for _, f, _ in data)
    assert all(f.src_ip == h2 for _, f, _ in parsed if f.opcode == roce.CNP)
    # a packet the switch drops (lossy) never reaches the port's tap, and
    # go-back-N sends later ones again: completeness shows only without
    if summary["retransmits"] == 0:
        for qp in {f.dest_qp for _, f, _ in data}:
            psns = [f.psn for _, f, _ in data if f.dest_qp == qp]
            assert sorted(psns) == list(range(min(psns), max(psns) + 1)), qp   # each PSN once
    assert parsed[-1][0] - parsed[0][0] == pytest.approx(0.5, rel=0.05)
    times, sizes = np.array([t for t, _, _ in data]), np.array([n for _, _, n in data])
    gaps_over_wire = np.diff(times) / (sizes[1:] * 8 / 1e9)
    assert np.median(gaps_over_wire) == pytest.approx(1.0, rel=0.1)


def test_sigterm_during_a_run_leaves_no_results_and_no_testbed(tmp_path):
    r = run_sandboxed(_cli_run, str(tmp_path), SHORT, 2.5, timeout_s=300)
    assert r["rc"] == 128 + signal.SIGTERM, r["out"] + r["err"]
    assert r["netns"] == [] and r["entries"] == []


def test_bad_scenario_exits_2_and_writes_nothing(tmp_path):
    scenario = tmp_path / "bad.toml"
    scenario.write_text('[traffic]\nflows = [["h0", "h7"]]\n')
    proc = subprocess.run([sys.executable, "-m", "cli.main", "run", str(scenario), "--results",
                           str(tmp_path / "results")], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "traffic.flows" in proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("spec,reason", [("s0:h9", "no link to 'h9'"), ("s7:h0", "no node 's7'"),
                                         ("s0", "expected NODE:PEER")])
def test_a_bad_capture_port_exits_2_before_anything_is_built(tmp_path, spec, reason):
    scenario = tmp_path / "short.toml"
    scenario.write_text(SHORT)
    proc = subprocess.run([sys.executable, "-m", "cli.main", "run", str(scenario), "--results",
                           str(tmp_path / "results"), "--state-dir", str(tmp_path / "state"),
                           "--capture", spec], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--capture {spec}" in lines[0] and reason in lines[0], lines
    assert not (tmp_path / "results").exists() and not (tmp_path / "state").exists()


def _top_during_run(tmp: str) -> dict:
    scenario = Path(tmp) / "scenario.toml"
    scenario.write_text(SHORT.replace("duration_s = 3.0", "duration_s = 6.0"))
    cli = [sys.executable, "-m", "cli.main"]
    run = subprocess.Popen(cli + ["run", str(scenario), "--results", tmp + "/results", "--state-dir",
                                  tmp + "/state"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    from testbed.state import StateStore
    store = StateStore(tmp + "/state")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("live" in store.read(i) for i in store.run_ids()):
        time.sleep(0.1)                                          # the RNICs are being loaded
    time.sleep(2.5)                                              # past the ~2 s DCQCN takes to converge
    top = subprocess.run(cli + ["top", "--state-dir", tmp + "/state", "--count", "1", "--interval", "1"],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    run.communicate(timeout=120)
    after = subprocess.run(cli + ["top", "--state-dir", tmp + "/state", "--count", "1"],
                           cwd=REPO, capture_output=True, text=True, timeout=60)
    return {"top": top, "after": after}


def test_top_shows_the_running_qps_rates(tmp_path):
    r = run_sandboxed(_top_during_run, str(tmp_path), timeout_s=300)
    top = r["top"]
    assert top.returncode == 0, top.stderr
    rows = [line.split() for line in top.stdout.splitlines() if line.split()[:1] in (["1"], ["3"])]
    assert [row[1] for row in rows] == ["h0->h2", "h1->h2"]
    sent = [float(row[4]) for row in rows]
    assert all(200 <= s <= 800 for s in sent) and 850 <= sum(sent) <= 1050, top.stdout
    assert r["after"].returncode == 1 and "no running experiment" in r["after"].stderr
