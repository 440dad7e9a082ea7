"""`prc-emu report` over comparison folders written here with known
iteration times: the table's statistics, pairing by comparison and run,
pooling across folders, catch-up time, and bad input. No root needed."""
import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from experiment.report import Run, load_runs, table_rows

REPO = Path(__file__).resolve().parent.parent


def _run_folder(folder: Path, durations: list[float], straggler_at: int, cnps: int) -> None:
    """A run of 1 warm-up + len(durations) - 1 measured iterations."""
    folder.mkdir(parents=True)
    t, rows = 0.0, []
    for k, d in enumerate(durations):
        rows.append({"job": "train", "iteration": k, "start_ms": t, "end_ms": t + d, "duration_ms": d,
                     "extra_compute_ms": 80.0 if k == straggler_at else 0.0, "comm_start_ms": t + 80,
                     "comm_end_ms": t + d})
        t += d
    with open(folder / "iterations.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = {"valid": True, "cnps": cnps, "ecn_marked_packets": 2 * cnps, "tail_drops": 0,
               "jobs": {"train": {"iteration_ms": {}, "warmup_iterations": 1},
                        "bg": {"kind": "onoff", "per_rank_share_of_line_during_training_comm": 0.2}}}
    (folder / "summary.json").write_text(json.dumps(summary))


def _comparison(root: Path, runs: dict[str, list[list[float]]], invalid=()) -> Path:
    """variant -> per run its iteration durations (iteration 3 straggles)."""
    rows = []
    for variant, per_run in runs.items():
        for r, durations in enumerate(per_run):
            folder = f"{variant}/r{r}"
            _run_folder(root / folder, durations, 3, cnps=10 * (r + 1))
            rows.append({"variant": variant, "run": r, "folder": folder, "valid": (variant, r) not in invalid})
    root.mkdir(exist_ok=True)
    (root / "compare.json").write_text(json.dumps({"rows": rows}))
    return root


def test_the_table_pairs_runs_by_comparison_and_run_and_pools_folders(tmp_path):
    a = _comparison(tmp_path / "a", {"dcqcn": [[150, 160, 160, 260, 200, 160], [150, 160, 160, 280, 160, 160]],
                                     "prc": [[150, 160, 160, 230, 160, 160], [150, 160, 160, 250, 170, 160]]})
    b = _comparison(tmp_path / "b", {"prc": [[150, 160, 160, 200, 160, 160]],
                                     "dcqcn": [[150, 160, 160, 250, 160, 160]]})
    base, rows = table_rows(load_runs([str(a), str(b)]))
    assert base == "dcqcn"
    prc = next(r for r in rows if r["variant"] == "prc")
    speedups = [260 / 230 - 1, 280 / 250 - 1, 250 / 200 - 1]          # the three same-seed pairs
    assert prc["straggler_speedup_pct"] == pytest.approx(100 * statistics.fmean(speedups))
    half = 4.303 * 100 * statistics.stdev(speedups) / 3 ** 0.5
    assert prc["straggler_speedup_hi"] - prc["straggler_speedup_pct"] == pytest.approx(half)
    assert prc["runs"] == 3
    assert prc["straggler_mean_ms"] == pytest.approx(statistics.fmean([230, 250, 200]))
    normal = [160] * 11 + [170]                  # iterations 1, 2, 4, 5 of each run (0 is warm-up)
    assert prc["normal_mean_ms"] == pytest.approx(statistics.fmean(normal)) and prc["normal_p99_ms"] == 170
    dcqcn = next(r for r in rows if r["variant"] == "dcqcn")
    assert dcqcn["straggler_speedup_pct"] is None and dcqcn["cnps"] == pytest.approx((10 + 20 + 10) / 3)
    assert dcqcn["background_share"] == pytest.approx(0.2)


def test_an_invalid_run_is_left_out_and_so_is_its_twin_pair(tmp_path):
    a = _comparison(tmp_path / "a", {"dcqcn": [[150, 160, 160, 260, 160, 160], [150, 160, 160, 280, 160, 160]],
                                     "prc": [[150, 160, 160, 230, 160, 160], [150, 160, 160, 140, 160, 160]]},
                    invalid={("prc", 1)})
    _base, rows = table_rows(load_runs([str(a)]))
    prc = next(r for r in rows if r["variant"] == "prc")
    assert prc["runs"] == 1 and prc["straggler_speedup_pct"] == pytest.approx(100 * (260 / 230 - 1))
    assert prc["straggler_speedup_lo"] is None


def test_catch_up_ends_at_the_first_iteration_back_within_five_percent_of_steady(tmp_path):
    _run_folder(tmp_path / "r", [150, 160, 160, 260, 200, 170, 167, 160], 3, 0)
    its = list(csv.DictReader(open(tmp_path / "r" / "iterations.csv")))
    run = Run("a", "dcqcn", 0, tmp_path / "r", json.loads((tmp_path / "r" / "summary.json").read_text()), its)
    # steady: 163.5 ms, the median normal iteration; 200 is above 1.05 x 163.5, 170 is within: back after it
    assert run.catch_up_ms() == [200 + 170]


def test_report_writes_its_table_and_plots_and_rejects_a_folder_that_is_no_comparison(tmp_path):
    a = _comparison(tmp_path / "a", {"dcqcn": [[150, 160, 160, 260, 160, 160]], "prc": [[150, 160, 160, 230, 160, 160]]})
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "cli.main", "report", str(a), "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "+13.0% (1 pair)" in proc.stdout                         # 260 / 230 - 1
    (made,) = out.iterdir()
    assert {p.name for p in made.iterdir()} == {"report.csv", "report.json", "iterations.png"}
    proc = subprocess.run([sys.executable, "-m", "cli.main", "report", str(a), str(tmp_path / "nope"), "--out",
                           str(tmp_path / "out2")], cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "nope: not a comparison's results" in lines[0]
    assert not (tmp_path / "out2").exists()


def test_a_no_straggler_twin_is_paired_with_its_own_dcqcn_run(tmp_path):
    a = _comparison(tmp_path / "a", {"dcqcn": [[150, 160, 160, 260, 160, 160]],
                                     "prc": [[150, 160, 160, 230, 160, 160]],
                                     "dcqcn-calm": [[150, 160, 160, 160, 160, 160]],
                                     "prc-calm": [[150, 160, 160, 160, 160, 200]]})
    _base, rows = table_rows(load_runs([str(a)]))
    by = {r["variant"]: r for r in rows}
    assert by["prc"]["base"] == "dcqcn" and by["prc-calm"]["base"] == "dcqcn-calm"
    assert by["dcqcn-calm"]["base"] is None and by["dcqcn-calm"]["iteration_speedup_pct"] is None
    # iterations 1-5: 160 x 3 + 160 + 200 (its iteration 3 carries 80 ms of extra compute: a straggler row)
    assert by["prc-calm"]["iteration_speedup_pct"] == pytest.approx(100 * (160 / 168 - 1))


def test_simulated_and_live_comparisons_are_not_pooled(tmp_path):
    from experiment.report import ReportError

    runs = {"dcqcn": [[150, 160, 160, 260, 160, 160]], "prc": [[150, 160, 160, 230, 160, 160]]}
    live = _comparison(tmp_path / "live", runs)
    simulated = _comparison(tmp_path / "sim", runs)
    meta = json.loads((simulated / "compare.json").read_text())
    (simulated / "compare.json").write_text(json.dumps({**meta, "simulator": {"step_us": 1.0}}))
    assert len(load_runs([str(simulated)])) == 2
    with pytest.raises(ReportError, match="sim is simulated and .*live live: report them apart"):
        load_runs([str(live), str(simulated)])
