"""`prc-emu report RESULTS...`: one table and two plots over the runs of
one or more comparisons (folders `prc-emu compare` wrote). Variants of
the same name are pooled across folders; a variant's speedup against
its base is paired run by run within a folder, where both ran with the
same seeds and both runs were valid. The base of `POLICY-REST` is
`dcqcn-REST` where there is one (a no-straggler twin against its own
DCQCN run), else `dcqcn` (else the first variant); DCQCN's variants
have none. Simulated and live comparisons are not pooled together.

Table, per variant: iteration times (mean, p50, p99 over every measured
iteration of the valid runs) for straggler and normal iterations apart;
the speedup on straggler iterations and on the mean iteration with a 95%
Student t interval over the pairs; the catch-up time; the background's
share of line while training communicates; CNPs, ECN-marked packets and
switch drops per run. Plots (experiment/report_plots.py): iterations.png
and straggler.png."""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from experiment.compare import interval
from experiment.report_plots import plot_iterations, plot_straggler, read_csv
from experiment.results import ResultsWriter, versions
from scenario.control import POLICIES
from workload.stats import percentile

CATCH_UP_TOLERANCE = 0.05     # caught up: an iteration within 5% of the steady iteration
TABLE_COLUMNS = ["variant", "runs", "base", "straggler_mean_ms", "straggler_p50_ms", "straggler_p99_ms",
                 "normal_mean_ms", "normal_p50_ms", "normal_p99_ms", "straggler_speedup_pct",
                 "straggler_speedup_lo", "straggler_speedup_hi", "iteration_speedup_pct", "iteration_speedup_lo",
                 "iteration_speedup_hi", "catch_up_ms", "background_share", "cnps", "ecn_marked", "drops"]


class ReportError(ValueError):
    """A results folder that cannot be reported; str() is one line."""


@dataclass
class Run:
    """One valid run of a variant: what the report reads of its folder."""
    source: str                      # the comparison folder
    variant: str
    index: int                       # run r of the comparison: same seeds in every variant
    folder: Path
    summary: dict
    iterations: list[dict] = field(default_factory=list)      # training jobs' rows of iterations.csv

    @cached_property
    def measured(self) -> list[dict]:
        """Iterations after each job's warm-up."""
        warmup = {name: job.get("warmup_iterations", 0) for name, job in self.summary["jobs"].items()}
        return [i for i in self.iterations if int(i["iteration"]) >= warmup.get(i["job"], 0)]

    @property
    def straggler_rows(self) -> list[dict]:
        return [i for i in self.measured if is_straggler(i)]

    def durations(self, straggler: bool) -> list[float]:
        return [float(i["duration_ms"]) for i in self.measured if is_straggler(i) == straggler]

    def mean_iteration(self) -> float | None:
        return _mean([float(i["duration_ms"]) for i in self.measured])

    def straggler_mean(self) -> float | None:
        return _mean(self.durations(True))

    def catch_up_ms(self) -> list[float]:
        """For each straggler iteration: from its end to the end of the
        first later iteration within CATCH_UP_TOLERANCE of the steady
        iteration (the run's last end if none is)."""
        normal = self.durations(False)
        if not normal:
            return []
        steady = statistics.median(normal)
        rows = self.measured
        out = []
        for k, it in enumerate(rows):
            if not is_straggler(it):
                continue
            later = [r for r in rows[k + 1:] if r["job"] == it["job"]]
            back = next((r for r in later if float(r["duration_ms"]) <= steady * (1 + CATCH_UP_TOLERANCE)), None)
            end = back or (later[-1] if later else it)
            out.append(float(end["end_ms"]) - float(it["end_ms"]))
        return out

    def background_share(self) -> float | None:
        return _mean([j["per_rank_share_of_line_during_training_comm"] for j in self.summary["jobs"].values()
                      if j.get("per_rank_share_of_line_during_training_comm") is not None])


def is_straggler(row: dict) -> bool:
    """An iterations.csv row in which a straggler added compute."""
    return float(row["extra_compute_ms"]) > 0


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def load_runs(folders: list[str]) -> list[Run]:
    runs = []
    kinds = {}                      # folder -> "simulated" or "live"
    for name in folders:
        root = Path(name)
        meta = root / "compare.json"
        if not meta.is_file():
            raise ReportError(f"{root}: not a comparison's results (no compare.json; `prc-emu compare` writes one)")
        try:
            compared = json.loads(meta.read_text())
            rows = compared["rows"]
        except (ValueError, KeyError) as exc:
            raise ReportError(f"{meta}: not readable ({exc})") from None
        kinds[name] = "simulated" if compared.get("simulator") else "live"
        if len(set(kinds.values())) > 1:       # variants pool by name: a simulated dcqcn is not a live one
            live = next(f for f, k in kinds.items() if k == "live")
            simulated = next(f for f, k in kinds.items() if k == "simulated")
            raise ReportError(f"{simulated} is simulated and {live} live: report them apart")
        for row in rows:
            if not row["valid"]:
                continue
            folder = root / row["folder"]
            try:
                summary = json.loads((folder / "summary.json").read_text())
                its = read_csv(folder / "iterations.csv")
            except (OSError, ValueError) as exc:
                raise ReportError(f"{folder}: incomplete run ({exc})") from None
            training = {n for n, j in summary["jobs"].items() if "iteration_ms" in j}
            runs.append(Run(str(root), row["variant"], row["run"], folder, summary,
                            [i for i in its if i["job"] in training]))
    if not runs:
        raise ReportError("no valid runs in " + ", ".join(folders))
    return runs


def _counter(run: Run, key: str) -> float:
    return run.summary.get(key, 0) or 0


def bases(variants: list[str]) -> tuple[str, dict[str, str]]:
    """The main base and each variant's own (see the module's text)."""
    main = "dcqcn" if "dcqcn" in variants else variants[0]
    own = {}
    for v in variants:
        if v == main or v.startswith("dcqcn-"):
            continue
        policy = next((p for p in POLICIES if v.startswith(p + "-")), None)
        twin = "dcqcn" + v[len(policy):] if policy else None
        own[v] = twin if twin in variants else main
    return main, own


def speedups(runs: list[Run], base_of: dict[str, str], value) -> dict[str, dict]:
    """variant -> interval of (base / variant - 1) x 100 over the pairs of
    runs with the same comparison and run index."""
    by_key = {(r.source, r.variant, r.index): r for r in runs}
    out: dict[str, list[float]] = {}
    for r in runs:
        twin = by_key.get((r.source, base_of.get(r.variant), r.index))
        if twin is None:
            continue
        mine, theirs = value(r), value(twin)
        if mine and theirs:
            out.setdefault(r.variant, []).append((theirs / mine - 1) * 100)
    return {v: interval(values) for v, values in out.items()}


def _spread(values: list[float]) -> tuple:
    if not values:
        return (None, None, None)
    ordered = sorted(values)
    return statistics.fmean(ordered), statistics.median(ordered), percentile(ordered, 0.99)


def table_rows(runs: list[Run]) -> tuple[str, list[dict]]:
    variants = list(dict.fromkeys(r.variant for r in runs))
    base, base_of = bases(variants)
    on_stragglers = speedups(runs, base_of, Run.straggler_mean)
    overall = speedups(runs, base_of, Run.mean_iteration)
    rows = []
    for v in variants:
        mine = [r for r in runs if r.variant == v]
        row = {"variant": v, "runs": len(mine), "base": base_of.get(v)}
        for kind, straggler in (("straggler", True), ("normal", False)):
            spread = _spread([d for r in mine for d in r.durations(straggler)])
            row.update(zip((f"{kind}_mean_ms", f"{kind}_p50_ms", f"{kind}_p99_ms"), spread))
        for prefix, stats in (("straggler_speedup", on_stragglers.get(v, {})), ("iteration_speedup", overall.get(v, {}))):
            row[f"{prefix}_pct"], row[f"{prefix}_lo"], row[f"{prefix}_hi"] = (
                stats.get("mean"), stats.get("lo"), stats.get("hi"))
        row.update(catch_up_ms=_mean([c for r in mine for c in r.catch_up_ms()]),
                   background_share=_mean([s for r in mine if (s := r.background_share()) is not None]),
                   cnps=statistics.fmean(_counter(r, "cnps") for r in mine),
                   ecn_marked=statistics.fmean(_counter(r, "ecn_marked_packets") for r in mine),
                   drops=statistics.fmean(_counter(r, "tail_drops") for r in mine))
        rows.append(row)
    return base, rows


def _num(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct(row: dict, prefix: str) -> str:
    mean, lo, hi = row[f"{prefix}_pct"], row[f"{prefix}_lo"], row[f"{prefix}_hi"]
    if mean is None:
        return "-"
    return f"{mean:+.1f}%" + (f" [{lo:+.1f}, {hi:+.1f}]" if lo is not None else " (1 pair)")


def format_table(rows: list[dict]) -> str:
    header = ("variant", "runs", "base", "straggler it. mean/p50/p99 ms", "normal it. mean/p50/p99 ms",
              "speedup vs base: straggler it.", "mean it.", "catch-up ms", "bg share", "CNPs", "ECN", "drops")
    body = [(r["variant"], str(r["runs"]), r["base"] or "-",
             "/".join(_num(r[f"straggler_{k}_ms"]) for k in ("mean", "p50", "p99")),
             "/".join(_num(r[f"normal_{k}_ms"]) for k in ("mean", "p50", "p99")),
             _pct(r, "straggler_speedup"), _pct(r, "iteration_speedup"), _num(r["catch_up_ms"]),
             _num(r["background_share"], 3), _num(r["cnps"], 0), _num(r["ecn_marked"], 0), _num(r["drops"], 0))
            for r in rows]
    widths = [max(len(line[k]) for line in (header, *body)) for k in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in (header, *body)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(folders: list[str], out_root: str) -> int:
    try:
        runs = load_runs(folders)
    except ReportError as exc:
        print(f"prc-emu report: {exc}", file=sys.stderr)
        return 2
    base, rows = table_rows(runs)
    report_id = f"report-{time.strftime('%Y%m%d-%H%M%S')}"
    with ResultsWriter(Path(out_root), report_id) as out:
        out.csv("report.csv", TABLE_COLUMNS, ([row[k] for k in TABLE_COLUMNS] for row in rows))
        out.json("report.json", {"sources": folders, "base": base, "rows": rows, "versions": versions(),
                                 "pairs": "speedup = base / variant - 1, paired by comparison and run (same seeds)",
                                 "catch_up": f"straggler iteration's end to the end of the first later iteration "
                                             f"within {CATCH_UP_TOLERANCE:.0%} of the steady (median normal) one"})
        plot_iterations(runs, out.dir / "iterations.png")
        plots = ["iterations.png"] + (["straggler.png"] if plot_straggler(runs, out.dir / "straggler.png") else [])
    print(format_table(rows))
    print(f"report: {out.final}  ({', '.join(plots)})")
    return 0
