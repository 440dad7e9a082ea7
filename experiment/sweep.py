"""`prc-emu sweep SWEEP`: every point of a sweep's grid (scenario.sweep),
each seed, simulated as one Dask task: on a LocalCluster of this
machine's cores by default, on a running cluster with --scheduler.
Results in one folder: sweep.csv (a row per run: the grid's values, the
seed, the report's metrics), sweep.json (per point: mean and 95%
interval over seeds of each metric, and where the grid has
control.policy, the speedup against the dcqcn point of the same other
values, paired by seed). With several training jobs, `training:`
metrics pool them (the mean over the jobs that have the metric), and the
table shows those."""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from experiment.compare import cell, grouped_intervals, run_metrics
from experiment.results import ResultsWriter, versions

FABRIC_METRICS = ("cnps", "ecn_marked_packets", "pauses", "tail_drops")
SPEEDUP_METRICS = ("straggler_iteration_ms", "iteration_mean_ms")
POLICY_KEY = "control.policy"
POOLED = "training"            # the pooled metrics' job name


def simulate(data: dict, seed: int, step_us: float) -> dict:
    """One run (in a worker): the metrics of a point's scenario at a seed."""
    from experiment import workload_report
    from scenario.sweep import Point
    from sim.run import run_sim

    scenario = Point({}, data).scenario(seed)
    result = run_sim(scenario, step_us)
    summary = workload_report.summarize(result, scenario, workload_report.job_iterations(result, scenario))
    metrics = run_metrics(summary)
    metrics.update(pooled(metrics))
    metrics.update({f"fabric:{k}": summary[k] for k in FABRIC_METRICS})
    return {"finished": summary["finished"], "metrics": metrics, "wall_s": result.wall_s,
            "steps": result.simulator["steps"]}


def pooled(metrics: dict[str, float]) -> dict[str, float]:
    """Over several training jobs, each speedup metric averaged over the
    jobs that have it, as `training:METRIC` (the same jobs straggle under
    every policy: their seeds are the point's)."""
    out = {}
    for name in SPEEDUP_METRICS:
        values = [v for k, v in metrics.items() if k.split(":", 1)[1] == name]
        if len(values) > 1:
            out[f"{POOLED}:{name}"] = sum(values) / len(values)
    return out


def base_points(points, keys: tuple[str, ...]) -> dict[int, int]:
    """point -> the dcqcn point with the same other values, where the grid
    varies control.policy and has one."""
    if POLICY_KEY not in keys:
        return {}
    others = lambda pt: repr([pt.values[k] for k in keys if k != POLICY_KEY])
    dcqcn = {others(pt): q for q, pt in enumerate(points) if pt.values[POLICY_KEY] == "dcqcn"}
    return {p: dcqcn[others(pt)] for p, pt in enumerate(points)
            if pt.values[POLICY_KEY] != "dcqcn" and others(pt) in dcqcn}


def speedups(rows: list[dict], base_of: dict[int, int]) -> dict[int, dict[str, dict]]:
    """point -> JOB:METRIC -> interval over seeds of base / point - 1."""
    by_key = {(r["point"], r["seed"]): r["metrics"] for r in rows}
    return grouped_intervals((p, key, by_key[base_of[p], seed][key] / value - 1)
                             for (p, seed), metrics in by_key.items() if (base_of.get(p), seed) in by_key
                             for key, value in metrics.items()
                             if key.split(":", 1)[1] in SPEEDUP_METRICS and value
                             and by_key[base_of[p], seed].get(key))


def _client(scheduler: str | None, workers: int):
    from dask.distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler, timeout="10s")
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=logging.ERROR)
    return Client(cluster)


def run_sweep(sweep, client, progress=print) -> list[dict]:
    """Every point x seed as a task on client: rows in point, seed order."""
    from dask.distributed import as_completed

    tasks = {}
    for p, point in enumerate(sweep.points):
        for seed in range(sweep.seeds):
            future = client.submit(simulate, point.data, seed, sweep.step_us, pure=False)
            tasks[future] = (p, seed)
    rows = []
    for done, future in enumerate(as_completed(tasks), 1):
        p, seed = tasks[future]
        rows.append({"point": p, "seed": seed, "values": sweep.points[p].values, **future.result()})
        progress(f"\r  runs {done}/{len(tasks)}", end="", flush=True)
    progress("")
    return sorted(rows, key=lambda r: (r["point"], r["seed"]))


def table(sweep, stats: dict, gains: dict) -> str:
    lines = []
    width = max(len(p.label) for p in sweep.points) if sweep.points else 5
    for p, point in enumerate(sweep.points):
        mine = stats.get(p, {})
        shown = sorted(k for k in mine if k.split(":", 1)[1] in SPEEDUP_METRICS)
        if any(k.startswith(POOLED + ":") for k in shown):       # many jobs: their pooled rows only
            shown = [k for k in shown if k.startswith(POOLED + ":")]
        for key in shown:
            gain = gains.get(p, {}).get(key)
            lines.append(f"  {point.label or '(scenario)':<{width}}  {key:<32} {cell(mine[key])} ms"
                         + (f"   speedup vs dcqcn {cell(gain, 100)} %" if gain else ""))
    return "\n".join(lines)


def main(sweep_path: str, results_root: str, seeds: int | None, scheduler: str | None, workers: int | None) -> int:
    from scenario.spec import ScenarioError
    from scenario.sweep import load_sweep

    try:
        sweep = load_sweep(sweep_path, seeds)
        if workers is not None and not 1 <= workers <= 256:
            raise ScenarioError(f"--workers must be 1..256, got {workers}")
    except ScenarioError as exc:
        print(f"prc-emu: sweep error: {exc}", file=sys.stderr)
        return 2
    workers = workers or min(os.cpu_count() or 1, len(sweep.points) * sweep.seeds)
    print(f"sweep {sweep.name}: {len(sweep.points)} points x {sweep.seeds} seeds in the simulator "
          f"(step {sweep.step_us:g} us) on " + (scheduler or f"a local cluster of {workers} workers"), flush=True)
    started = time.perf_counter()
    try:
        with _client(scheduler, workers) as client:
            rows = run_sweep(sweep, client)
    except OSError as exc:            # no scheduler at that address
        print(f"prc-emu: cannot reach the Dask scheduler {scheduler}: {exc}", file=sys.stderr)
        return 1
    stats = grouped_intervals((r["point"], k, v) for r in rows for k, v in r["metrics"].items())
    gains = speedups(rows, base_points(sweep.points, sweep.keys))
    keys = sorted({k for r in rows for k in r["metrics"]})
    sweep_id = f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    with ResultsWriter(Path(results_root), sweep_id) as out:
        out.csv("sweep.csv", ["point", *sweep.keys, "seed", "finished", "wall_s", *keys],
                ([r["point"], *(r["values"][k] for k in sweep.keys), r["seed"], r["finished"], f"{r['wall_s']:.2f}",
                  *(r["metrics"].get(k, "") for k in keys)] for r in rows))
        out.json("sweep.json", {"sweep": sweep_path, "name": sweep.name, "scenario": str(sweep.scenario_path),
                                "grid": list(sweep.keys), "seeds": sweep.seeds, "step_us": sweep.step_us,
                                "scheduler": scheduler or f"local cluster, {workers} workers",
                                "points": [{"values": pt.values, "stats": stats.get(p, {}),
                                            "speedup_vs_dcqcn": gains.get(p, {})}
                                           for p, pt in enumerate(sweep.points)],
                                "rows": rows, "wall_s": time.perf_counter() - started, "versions": versions(),
                                "seeds_note": "seed s adds s to every job's seed, at every point"})
    print(table(sweep, stats, gains))
    print(f"results: {out.final}  ({time.perf_counter() - started:.1f} s)")
    return 0 if all(r["finished"] for r in rows) else 3
