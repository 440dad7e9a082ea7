"""`prc-emu sweep`: a grid of scenario keys x seeds in the simulator on a
Dask cluster (a LocalCluster started here, reached by its address as a
remote one would be), one table, the same result as a run made here."""
import csv
import json
from pathlib import Path

import pytest

from bad_input import cli_rejects
from scenario.errors import ScenarioError
from scenario.sweep import parse_sweep

REPO = Path(__file__).resolve().parent.parent
TRAINING = str(REPO / "examples" / "training.toml")
GRID = {"control.policy": ["dcqcn", "prc"], "control.gain": [10, 40], "job.train.model.backward_us": [533, 600]}


def _write(tmp_path, grid=GRID, **top):
    path = tmp_path / "sweep.toml"
    lines = [f'scenario = "{TRAINING}"'] + [f"{k} = {json.dumps(v)}" for k, v in top.items()] + ["[grid]"]
    lines += [f'"{k}" = {json.dumps(v)}' for k, v in grid.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_grid_is_every_combination_with_its_keys_set(tmp_path):
    sweep = parse_sweep({"scenario": TRAINING, "grid": GRID}, tmp_path)
    assert len(sweep.points) == 8 and sweep.keys == tuple(GRID)
    point = sweep.points[-1]
    assert point.values == {"control.policy": "prc", "control.gain": 40, "job.train.model.backward_us": 600}
    sc = point.scenario(3)
    assert sc.control.policy == "prc" and sc.control.gain == 40
    train = next(j for j in sc.jobs if j.name == "train")
    assert train.model.backward_us == 600 and train.seed == 1 + 3


@pytest.mark.parametrize("grid,key", [
    ({"job.nope.iterations": [3]}, "grid.job.nope.iterations"),
    ({"control.gain": []}, "grid.control.gain"),
    ({"control": [1]}, "grid.control"),
    ({"control.policy": ["dcqcn", "fast"]}, "grid"),
])
def test_bad_grids_name_the_key(tmp_path, grid, key):
    with pytest.raises(ScenarioError, match=f"^{key}:"):
        parse_sweep({"scenario": TRAINING, "grid": grid}, tmp_path)


def test_a_bad_sweep_exits_2_and_leaves_nothing(tmp_path):
    line = cli_rejects(["sweep", str(_write(tmp_path, {"control.policy": ["nope"]}))], tmp_path, state_dir=False)
    assert "control.policy" in line and "nope" in line
    line = cli_rejects(["sweep", str(_write(tmp_path, seeds=0))], tmp_path, state_dir=False)
    assert line.endswith("must be 1..100, got 0")


def test_eight_points_by_two_seeds_on_a_dask_cluster(tmp_path, capsys):
    from dask.distributed import LocalCluster

    from cli.main import main
    from experiment.sweep import simulate

    results = tmp_path / "results"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert main(["sweep", str(_write(tmp_path, seeds=2)), "--results", str(results),
                     "--scheduler", cluster.scheduler_address]) == 0
    [folder] = results.iterdir()
    rows = list(csv.DictReader((folder / "sweep.csv").open()))
    assert len(rows) == 16 and {r["seed"] for r in rows} == {"0", "1"}
    assert all(r["finished"] == "True" for r in rows)
    # the cluster's run of a point is the run made here with the same seed
    report = json.loads((folder / "sweep.json").read_text())
    row = report["rows"][-1]
    sweep = parse_sweep({"scenario": TRAINING, "grid": GRID}, tmp_path)
    here = simulate(sweep.points[row["point"]].data, row["seed"], 1.0)
    assert here["metrics"] == row["metrics"]
    # prc points carry their speedup against the dcqcn point of the same other values
    prc = [p for p in report["points"] if p["values"]["control.policy"] == "prc"]
    assert all(p["speedup_vs_dcqcn"]["train:straggler_iteration_ms"]["n"] == 2 for p in prc)
    assert not any(p["speedup_vs_dcqcn"] for p in report["points"] if p["values"]["control.policy"] == "dcqcn")
    assert "speedup vs dcqcn" in capsys.readouterr().out


def test_several_training_jobs_pool_into_training_metrics():
    from experiment.sweep import pooled
    got = pooled({"a:straggler_iteration_ms": 2.0, "b:straggler_iteration_ms": 4.0, "a:iteration_mean_ms": 1.0,
                  "bg:share_during_comm": 0.5})
    assert got == {"training:straggler_iteration_ms": 3.0}      # one job's metric is not pooled
