"""`prc-emu compare PLAN`: the variants of a plan (scenario.plan) run live
(or in the simulator with --sim), each `runs` times with the same seeds,
the variants interleaved (run r starts at variant r, so none always runs
first); a run that measured the
machine rather than the network (summary `valid` false) is repeated with
the same seeds after the others, at most MAX_RETRIES times, and left out
of the statistics. Every run's results as `prc-emu run` writes them, and
across runs compare.csv, compare.json (mean and 95% interval of each
metric per variant over its valid runs, and of its paired relative change
against the first variant, run by run) and compare.png."""
from __future__ import annotations

import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

from experiment.results import ResultsWriter, versions

PLOT = "compare.png"
MAX_RETRIES = 2             # an invalid run is repeated, same seeds, at most this many times

# metric: (label, its value from a job's summary.json entry, or None)
TRAINING_METRICS = {
    "amplification": ("straggler iteration slowdown / added compute", lambda j: j.get("amplification")),
    "job_amplification": ("time the job lost / added compute", lambda j: j.get("job_amplification")),
    "straggler_slowdown_ms": ("straggler iteration slowdown (ms live)", lambda j: j.get("straggler_slowdown_ms")),
    "straggler_iteration_ms": ("straggler iteration (ms live)", lambda j: j["straggler_ms"].get("mean")),
    "steady_ms": ("steady iteration (median of normal, ms live)", lambda j: j["normal_ms"].get("p50")),
    "normal_cv": ("CV of normal iterations", lambda j: j["normal_ms"].get("cv")),
    "iteration_mean_ms": ("mean iteration (ms live)", lambda j: j["iteration_ms"].get("mean")),
}
BACKGROUND_METRICS = {
    "share_during_comm": ("per-rank share of line while training communicates",
                          lambda j: j.get("per_rank_share_of_line_during_training_comm")),
}

# two-sided 95% Student t quantiles by degrees of freedom
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


def interval(values: list[float]) -> dict:
    """Mean and its 95% Student t interval (none from one value)."""
    n = len(values)
    if not n:
        return {"n": 0}
    mean = statistics.fmean(values)
    if n == 1:
        return {"n": 1, "mean": mean, "lo": None, "hi": None}
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.96 + 2.4 / (n - 1)
    half = t * statistics.stdev(values) / math.sqrt(n)
    return {"n": n, "mean": mean, "lo": mean - half, "hi": mean + half}


def run_metrics(summary: dict) -> dict[str, float]:
    """JOB:METRIC -> value of one run's summary.json (those it has)."""
    out = {}
    for name, job in summary["jobs"].items():
        metrics = TRAINING_METRICS if "iteration_ms" in job else BACKGROUND_METRICS
        for metric, (_label, value_of) in metrics.items():
            value = value_of(job)
            if value is not None:
                out[f"{name}:{metric}"] = value
    return out


def grouped_intervals(samples) -> dict:
    """(group, JOB:METRIC, value) samples -> group -> JOB:METRIC -> interval."""
    grouped: dict[str, dict[str, list[float]]] = {}
    for variant, key, value in samples:
        grouped.setdefault(variant, {}).setdefault(key, []).append(value)
    return {v: {k: interval(vals) for k, vals in metrics.items()} for v, metrics in grouped.items()}


def aggregate(rows: list[dict]) -> dict:
    """rows: {variant, run, valid, metrics} -> variant -> JOB:METRIC ->
    interval over the valid runs (an invalid one measured the machine)."""
    return grouped_intervals((r["variant"], k, v) for r in rows if r["valid"] for k, v in r["metrics"].items())


def versus(rows: list[dict], base: str) -> dict:
    """variant -> JOB:METRIC -> interval of (variant - base) / base over
    the runs (same seeds) where both were valid: the paired change
    against variant `base`."""
    valid = {(r["variant"], r["run"]): r["metrics"] for r in rows if r["valid"]}
    return grouped_intervals((variant, k, (v - valid[base, run][k]) / valid[base, run][k])
                      for (variant, run), metrics in valid.items()
                      if variant != base and (base, run) in valid
                      for k, v in metrics.items() if valid[base, run].get(k))


def _label(key: str) -> str:
    metric = key.split(":", 1)[1]
    return {**TRAINING_METRICS, **BACKGROUND_METRICS}[metric][0]


def cell(stat: dict, scale: float = 1.0) -> str:
    if not stat.get("n"):
        return "-"
    if stat["lo"] is None:
        return f"{stat['mean'] * scale:.2f} (1 run)"
    return f"{stat['mean'] * scale:.2f} [{stat['lo'] * scale:.2f}, {stat['hi'] * scale:.2f}]"


def table(plan, rows: list[dict], stats: dict, changes: dict | None = None) -> str:
    keys = sorted({k for metrics in stats.values() for k in metrics})
    width = max(len(v.name) for v in plan.variants)
    lines = []
    for v in plan.variants:
        mine = [r for r in rows if r["variant"] == v.name]
        bad = [r for r in mine if not r["valid"]]
        lines.append(f"  {v.name:<{width}}  {len(mine) - len(bad)} valid runs in {len(mine)}"
                     + "".join(f"; run {r['run'] + 1} attempt {r['attempt']} left out: {r['invalid_because']}"
                             for r in bad))
    for key in keys:
        lines.append(f"  {key} ({_label(key)}), mean [95% interval] over runs:")
        for v in plan.variants:
            change = (changes or {}).get(v.name, {}).get(key, {})
            lines.append(f"    {v.name:<{width}}  {cell(stats.get(v.name, {}).get(key, {}))}"
                         + (f"   {cell(change, 100)}% vs {plan.variants[0].name}" if change.get("n") else ""))
    return "\n".join(lines)


def plot(plan, rows: list[dict], stats: dict, path: Path) -> None:
    """A panel per training metric of interest: a bar per variant at the
    mean, its 95% interval, and each run as a dot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in sorted({k for m in stats.values() for k in m})
            if k.split(":", 1)[1] in ("amplification", "job_amplification", "steady_ms", "normal_cv")]
    if not keys:
        return
    fig, axes = plt.subplots(1, len(keys), figsize=(3.6 * len(keys), 3.8), squeeze=False)
    names = [v.name for v in plan.variants]
    for ax, key in zip(axes[0], keys):
        for x, name in enumerate(names):
            s = stats.get(name, {}).get(key, {})
            if not s.get("n"):
                continue
            ax.bar(x, s["mean"], color="tab:blue", alpha=0.35)
            if s["lo"] is not None:
                ax.errorbar(x, s["mean"], yerr=[[s["mean"] - s["lo"]], [s["hi"] - s["mean"]]], color="black",
                            capsize=4)
            runs = [r["metrics"][key] for r in rows if r["variant"] == name and r["valid"] and key in r["metrics"]]
            ax.plot([x] * len(runs), runs, "o", color="tab:blue", markersize=4)
        if key.endswith("amplification"):
            ax.axhline(1.0, color="gray", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
        ax.set_title(f"{key}\n{_label(key)}", fontsize=8)
    fig.suptitle(f"{plan.name}: up to {plan.runs} valid runs per variant (dots), mean and 95% interval",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class RunQueue:
    """Iterates (run, variant, attempt): run r starts at variant r; a run
    put back with again() comes once more, same run (so same seeds),
    after those waiting, at most MAX_RETRIES times."""

    def __init__(self, variants, runs: int):
        self.waiting = [(r, variants[(i + r) % len(variants)], 1) for r in range(runs)
                        for i in range(len(variants))]
        self.order: list[tuple] = []

    def __iter__(self):
        while self.waiting:
            self.order.append(self.waiting.pop(0))
            yield self.order[-1]

    def again(self, run: int, variant, attempt: int) -> None:
        if attempt <= MAX_RETRIES:
            self.waiting.append((run, variant, attempt + 1))


def _runner(state_dir: str | None, step_us: float | None):
    """run(scenario, label, folder) -> (results folder, summary) or an
    exit code: live on a fresh testbed, or in the simulator with step_us."""
    from experiment.run import iteration_counter, on_testbed, workload_body

    if step_us is not None:
        from experiment.sim_run import in_simulator
        return lambda scenario, label, folder: in_simulator(scenario, label, folder, step_us,
                                                            iteration_counter(scenario, "    "))
    from testbed.state import StateStore, state_dir as resolve_state_dir

    store = StateStore(resolve_state_dir(state_dir))
    return lambda scenario, label, folder: on_testbed(scenario, label, folder, store,
                                                      workload_body(scenario, iteration_counter(scenario, "    ")))


def main(plan_path: str, results_root: str, state_dir: str | None, runs: int | None = None,
         policies: list[str] | None = None, step_us: float | None = None) -> int:
    """plan_path: a plan, or with `policies` a scenario to run under each;
    live, or in the simulator in steps of step_us."""
    from experiment.sim_run import check_step
    from scenario.plan import DEFAULT_RUNS, MAX_RUNS, load_plan, policy_plan
    from scenario.spec import ScenarioError

    try:
        if step_us is not None:
            check_step(step_us)
        if runs is not None and not 1 <= runs <= MAX_RUNS:
            raise ScenarioError(f"--runs (run --seeds) must be in 1..{MAX_RUNS}, got {runs}")
        live = step_us is None
        if policies:
            plan = policy_plan(plan_path, policies, runs or DEFAULT_RUNS, live)
        else:
            plan = load_plan(plan_path, live)
            plan = dataclasses.replace(plan, runs=runs) if runs is not None else plan
    except ScenarioError as exc:
        print(f"prc-emu: plan error: {exc}", file=sys.stderr)
        return 2
    run_one = _runner(state_dir, step_us)
    queue = RunQueue(plan.variants, plan.runs)
    compare_id = f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    rows = []
    with ResultsWriter(Path(results_root), compare_id) as out:
        for run, variant, attempt in queue:
            scenario = variant.scenario(run)
            print(f"[{len(queue.order)}/{len(queue.order) + len(queue.waiting)}] {variant.name}, "
                  f"run {run + 1} (seeds +{run})" + (f", attempt {attempt}" if attempt > 1 else ""), flush=True)
            ran = run_one(scenario, f"{plan_path}#{variant.name}", out.dir / variant.name)
            print()
            if isinstance(ran, int):
                return ran              # the partial comparison is removed with the writer
            folder, summary = ran
            rows.append({"variant": variant.name, "run": run, "attempt": attempt,
                         "folder": str(folder.relative_to(out.dir)),
                         "finished": summary["finished"], "valid": summary["valid"],
                         "invalid_because": summary["invalid_because"], "metrics": run_metrics(summary)})
            if not summary["valid"]:
                print(f"    invalid: {summary['invalid_because']}", flush=True)
                queue.again(run, variant, attempt)
        stats = aggregate(rows)
        changes = versus(rows, plan.variants[0].name)
        keys = sorted({k for r in rows for k in r["metrics"]})
        out.csv("compare.csv", ["variant", "run", "attempt", "valid", "folder"] + keys,
                ([r["variant"], r["run"], r["attempt"], r["valid"], r["folder"]]
                 + [r["metrics"].get(k, "") for k in keys]
                 for r in rows))
        out.json("compare.json", {"plan": plan_path, "rows": rows, "scenario": str(plan.scenario_path),
                                  "simulator": {"step_us": step_us} if step_us is not None else None,
                                  "runs": plan.runs,
                                  "order": [f"{v.name}#{r}" for r, v, _attempt in queue.order],
                                  "variants": {v.name: v.about for v in plan.variants},
                                  "metrics": {k: _label(k) for k in keys}, "stats": stats,
                                  "change_vs_" + plan.variants[0].name: changes,
                                  "seeds": "run r adds r to every job's seed, in every variant",
                                  "versions": versions()})
        plot(plan, rows, stats, out.dir / PLOT)
    print(table(plan, rows, stats, changes))
    print(f"results: {out.final}  (plot: {out.final / PLOT})")
    return 0 if all(r["finished"] for r in rows) else 3
