"""Training jobs on the live testbed: ranks own QPs, ring steps wait on
real completions, receivers' byte counters see what the algorithm says,
and `prc-emu run` writes the workload's results."""
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from testbed.isolated import run_sandboxed

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.root, pytest.mark.bcc, pytest.mark.netns]
GRADIENT = 2_000_000
ITERATIONS = 4


def _jobs(background: str = "onoff") -> str:
    text = f"""
[topology]
hosts = 4
[[job]]
name = "train"
iterations = {ITERATIONS}
[job.model]
forward_us = 200
backward_us = 300
gradient_bytes = {GRADIENT}
chunk_bytes = 262144
[[job.straggler]]
rank = 2
iterations = [2]
slowdown = 0.4
"""
    if background == "onoff":
        text += """
[[job]]
name = "bg"
kind = "onoff"
burst_bytes = 1000000
period_us = 700
collective = "alltoall"
[job.model]
chunk_bytes = 131072
"""
    return text


def _live(text: str):
    import tomllib

    from experiment.workload_live import run_workload
    from scenario.spec import parse_scenario
    from testbed.builder import Testbed
    from testbed.state import StateStore

    scenario = parse_scenario(tomllib.loads(text))
    with tempfile.TemporaryDirectory() as state, Testbed.up(scenario, StateStore(state)) as testbed:
        return run_workload(testbed, scenario, limit_s=60)


def test_ring_allreduce_ranks_own_their_qps_and_steps_wait_on_completions():
    from workload import events as ev

    result = run_sandboxed(_live, _jobs(), timeout_s=300)
    assert result.finished
    train = [q for q in result.qp_stats if q["job"] == "train"]
    # each rank sends 2(n-1)/n of the buffer per iteration, counted by the receivers' nic_rx
    assert sorted((q["src_rank"], q["dst_rank"]) for q in train) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert all(q["payload_received"] == ITERATIONS * 2 * 3 * GRADIENT // 4 for q in train), train
    bg = [q for q in result.qp_stats if q["job"] == "bg"]
    assert len(bg) == 12 and all(q["messages_received"] > 0 for q in bg)
    # 250 kB per peer per burst in two messages (128 KiB and the rest); the run ends when training does,
    # so a QP may be partway through one more message (whose RETH the payload count still holds)
    for q in bg:
        whole = q["messages_received"] // 2 * 250_000 + q["messages_received"] % 2 * 131_072
        assert 0 <= q["payload_received"] - whole < 131_072 + 16, q
    # every rank is a NIC process of its own: 4 training ranks, then 4 background ranks
    assert sorted(result.procs) == list(range(8))
    assert {result.procs[p] for p in range(4)} == {("train", r) for r in range(4)}
    # a ring step ends only after its data is visible and its send acknowledged:
    # no rank's step ends before its left neighbour began that step
    starts, ends = {}, {}
    for e in result.events:
        if e.job == "train" and e.kind in (ev.STEP_START, ev.STEP_END):
            (starts if e.kind == ev.STEP_START else ends)[e.rank, e.iteration, e.detail] = e.t_ns
    assert len(ends) == ITERATIONS * 4 * 6
    for (rank, it, detail), t_end in ends.items():
        left = (rank - 1) % 4
        assert t_end > starts[left, it, detail], (rank, it, detail)
    # the straggler's extra compute shows in its iteration only
    computes = [e for e in result.events if e.job == "train" and e.rank == 2 and e.kind in
                (ev.COMPUTE_START, ev.COMPUTE_END)]
    spans = {}
    for a, b in zip(computes[::2], computes[1::2]):
        spans.setdefault(a.iteration, 0)
        spans[a.iteration] += b.t_ns - a.t_ns
    assert spans[2] == pytest.approx(1.4 * spans[1], rel=0.02)


def test_run_writes_the_workload_results(tmp_path):
    def cli(tmp: str, text: str):
        scenario = Path(tmp) / "jobs.toml"
        scenario.write_text(text)
        proc = subprocess.run([sys.executable, "-m", "cli.main", "run", str(scenario), "--results",
                               tmp + "/results", "--state-dir", tmp + "/state"], cwd=REPO,
                              capture_output=True, text=True, timeout=200)
        return proc.returncode, proc.stdout, proc.stderr

    rc, out, err = run_sandboxed(cli, str(tmp_path), _jobs(), timeout_s=300)
    assert rc == 0, out + err
    (folder,) = (tmp_path / "results").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "connections.csv", "control.csv", "iterations.csv", "queues.csv", "rates.csv",
        "summary.json", "timeline.csv", "timeline.png", "versions.json"]
    summary = json.loads((folder / "summary.json").read_text())
    train = summary["jobs"]["train"]
    assert summary["finished"] and train["iterations_measured"] == ITERATIONS - 1
    # a run is invalid exactly when this machine lost packets outside the model
    assert summary["valid"] == (summary["receive_backlog_drops"] == 0 and summary["send_errors"] == 0)
    assert train["straggler_iterations"] == [2] and train["extra_compute_ms"] == pytest.approx(0.4 * 500 * 100 / 1000, abs=0.5)
    # (measured from the compute events: a live timer fires up to ~0.5 ms late)
    assert train["normal_ms"]["n"] == 2 and train["straggler_ms"]["mean"] > train["normal_ms"]["mean"]
    assert 0 < summary["jobs"]["bg"]["per_rank_share_of_line_overall"] <= 1.05
    rows = (folder / "iterations.csv").read_text().splitlines()
    assert len(rows) == 1 + ITERATIONS and rows[0].startswith("job,iteration,start_ms")
    events = (folder / "timeline.csv").read_text().splitlines()
    assert events[0] == "time_ms,job,rank,proc,iteration,event,detail,bytes_remaining"
    assert sum(",train,0,0,0,step_end," in line for line in events) == 6
    assert (folder / "timeline.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_runs_each_variant_interleaved_and_reports_intervals(tmp_path):
    (tmp_path / "jobs.toml").write_text(_jobs())
    (tmp_path / "plan.toml").write_text('scenario = "jobs.toml"\nruns = 2\n[[variant]]\nname = "onoff"\n'
                                        '[[variant]]\nname = "alone"\nwithout = ["bg"]\n')

    def cli(tmp: str):
        proc = subprocess.run([sys.executable, "-m", "cli.main", "compare", tmp + "/plan.toml", "--results",
                               tmp + "/results", "--state-dir", tmp + "/state"], cwd=REPO,
                              capture_output=True, text=True, timeout=250)
        return proc.returncode, proc.stdout, proc.stderr

    rc, out, err = run_sandboxed(cli, str(tmp_path), timeout_s=300)
    assert rc == 0, out + err
    (folder,) = (tmp_path / "results").iterdir()
    report = json.loads((folder / "compare.json").read_text())
    # run r starts at variant r: neither variant always goes first (invalid runs come again after)
    assert report["order"][:4] == ["onoff#0", "alone#0", "alone#1", "onoff#1"]
    assert sorted(p.name for p in folder.iterdir()) == ["alone", "compare.csv", "compare.json", "compare.png",
                                                       "onoff"]
    for variant in ("onoff", "alone"):
        runs = list((folder / variant).iterdir())
        assert len(runs) == sum(r["variant"] == variant for r in report["rows"]) >= 2
        assert all((r / "summary.json").exists() for r in runs)
        valid = [r for r in report["rows"] if r["variant"] == variant and r["valid"]]
        stat = report["stats"][variant]["train:amplification"]
        assert stat["n"] == len(valid)
        if valid:
            assert stat["mean"] == pytest.approx(sum(r["metrics"]["train:amplification"] for r in valid) / len(valid))
    assert "bg:share_during_comm" in report["stats"]["onoff"] and "bg:share_during_comm" not in report["stats"]["alone"]
    assert "train:amplification (straggler iteration slowdown / added compute)" in out
    # the report over it: one row per variant, the plots, and the run series it reads
    for variant in ("onoff", "alone"):
        for run in (folder / variant).iterdir():
            rates = list(csv.DictReader(open(run / "rates.csv")))
            assert {r["job"] for r in rates} >= {"train"}
            for proc in {r["proc"] for r in rates}:
                delivered = [int(r["delivered_bytes"]) for r in rates if r["proc"] == proc]
                assert delivered == sorted(delivered) and delivered[-1] > 0
            assert {r["port"] for r in csv.DictReader(open(run / "queues.csv"))} == {f"s0:h{i}" for i in range(4)}
    proc = subprocess.run([sys.executable, "-m", "cli.main", "report", str(folder), "--out", str(tmp_path / "rep")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (made,) = (tmp_path / "rep").iterdir()
    rows = {r["variant"]: r for r in csv.DictReader(open(made / "report.csv"))}
    assert set(rows) == {"onoff", "alone"} and all(float(r["straggler_mean_ms"]) > 0 for r in rows.values())
    assert (made / "iterations.png").stat().st_size > 0 and (made / "straggler.png").stat().st_size > 0


PIPELINE = """
[topology]
hosts = 4
[[job]]
name = "pipe"
pp = 2
dp = 2
microbatches = 2
iterations = 3
[job.model]
forward_us = 100
backward_us = 200
activation_bytes = 500000
gradient_bytes = 1000000
"""


def test_live_pipeline_stages_compute_a_microbatch_only_after_its_input_arrived():
    from workload import events as ev

    result = run_sandboxed(_live, PIPELINE, timeout_s=300)
    assert result.finished
    starts = {(e.rank, e.iteration, e.detail): e.t_ns for e in result.events if e.kind == ev.COMPUTE_START}
    ends = {(e.rank, e.iteration, e.detail): e.t_ns for e in result.events if e.kind == ev.COMPUTE_END}
    wire_ns = 500_000 * 8 / result.line_rate_bps * 1e9         # the activation's serialisation at line rate
    checked = 0
    for it in range(3):
        for mb in range(2):
            for dp in range(2):
                first, last = dp, 2 + dp                        # ranks of stage 0 and 1 (tp=1: rank = dp + 2 pp)
                assert starts[last, it, f"F mb {mb}"] >= ends[first, it, f"F mb {mb}"] + 0.95 * wire_ns
                assert starts[first, it, f"B mb {mb}"] >= ends[last, it, f"B mb {mb}"] + 0.95 * wire_ns
                checked += 2
    assert checked == 24


def test_a_lossy_fabric_drops_and_the_training_job_still_finishes_with_every_byte_once():
    # every ring message starts at line rate (fresh QP state) into a 20 KB
    # buffer whose port an always-on background from another host already
    # fills (its ring visits the hosts in another order)
    text = _jobs("none").replace("[topology]", "[links]\nbuffer_bytes = 20000\n[pfc]\nenabled = false\n[topology]")
    text = text.replace('name = "train"', 'name = "train"\nqp_state = "fresh"')
    text += '[[job]]\nname = "bg"\nkind = "bulk"\nhosts = ["h0", "h2", "h1", "h3"]\n[job.model]\nchunk_bytes = 262144\n'
    result = run_sandboxed(_live, text, timeout_s=300)
    assert result.finished and result.port_drops > 0
    train = [q for q in result.qp_stats if q["job"] == "train"]
    assert sum(q["retransmits"] for q in train) > 0
    assert all(q["payload_received"] == ITERATIONS * 2 * 3 * GRADIENT // 4 for q in train), train
