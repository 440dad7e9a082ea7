"""The report's plots: iterations.png (every measured iteration time per
variant, straggler iterations apart) and straggler.png (per-process
delivered rate, PRC weight and switch queues around one straggler
iteration per variant), from the runs experiment.report loaded."""
from __future__ import annotations

import csv
import statistics
from pathlib import Path


def read_csv(path: Path, missing_ok: bool = False) -> list[dict]:
    """A CSV file's rows as dicts by its header (none for a missing file
    if missing_ok: runs written before it existed)."""
    if missing_ok and not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def plot_iterations(runs: list, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(r.variant for r in runs))
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(variants), 4.0))
    for x, v in enumerate(variants):
        for straggler, color, offset in ((False, "tab:blue", -0.12), (True, "tab:red", 0.12)):
            values = [d for r in runs if r.variant == v for d in r.durations(straggler)]
            if values:
                ax.plot([x + offset] * len(values), values, "o", color=color, alpha=0.5, markersize=4,
                        label=("straggler" if straggler else "normal") + " iterations" if x == 0 else None)
                ax.hlines(statistics.fmean(values), x + offset - 0.1, x + offset + 0.1, color="black")
    ax.set_xticks(range(len(variants)), variants, rotation=15)
    ax.set_ylabel("iteration time (ms, live)")
    ax.set_title("every measured iteration of the valid runs; bars: means", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _series(rows: list[dict], key: str, value: str) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list] = {}
    for row in rows:
        out.setdefault(row[key], []).append((float(row["time_ms"]), float(row[value])))
    return out


def _rates(points: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Cumulative bytes sampled over ms -> (mid times, Gbit/s)."""
    times, gbps = [], []
    for (t0, b0), (t1, b1) in zip(points, points[1:]):
        if t1 > t0:
            times.append((t0 + t1) / 2)
            gbps.append((b1 - b0) * 8 / ((t1 - t0) * 1e6))
    return times, gbps


def plot_straggler(runs: list, path: Path) -> bool:
    """Per variant, the first valid run with a straggler iteration: the
    processes' delivered rates, their weights and the switch queues from
    one steady iteration before it to two after. False if none has one."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = {}
    for r in runs:
        late = r.straggler_rows
        if late and r.variant not in chosen and (r.folder / "rates.csv").is_file():
            chosen[r.variant] = (r, late[0])
    if not chosen:
        return False
    fig, axes = plt.subplots(3, len(chosen), figsize=(4.2 * len(chosen), 7.5), squeeze=False, sharex="col")
    for col, (variant, (run, it)) in enumerate(chosen.items()):
        steady = statistics.median(run.durations(False) or [float(it["duration_ms"])])
        t0 = float(it["start_ms"])
        lo, hi = t0 - steady, float(it["end_ms"]) + 2 * steady

        def inside(points):
            return [(t - t0, v) for t, v in points if lo <= t <= hi]

        rates = read_csv(run.folder / "rates.csv")
        names = {row["proc"]: f"{row['job']} r{row['rank']}" for row in rates}
        for proc, points in sorted(_series(rates, "proc", "delivered_bytes").items(), key=lambda kv: int(kv[0])):
            times, gbps = _rates(inside(points))
            axes[0][col].plot(times, gbps, linewidth=1, label=names[proc])
        control = read_csv(run.folder / "control.csv", missing_ok=True)
        for proc, points in sorted(_series(control, "proc", "weight").items(), key=lambda kv: int(kv[0])):
            shown = inside([(lo, 1.0)] + points + [(hi, points[-1][1])])
            axes[1][col].step([t for t, _ in shown], [w for _, w in shown], where="post", linewidth=1,
                              label=names.get(proc, proc))
        queues = read_csv(run.folder / "queues.csv", missing_ok=True)
        for port, points in sorted(_series(queues, "port", "queued_bytes").items()):
            shown = inside(points)
            if any(q for _, q in shown):
                axes[2][col].plot([t for t, _ in shown], [q / 1e3 for _, q in shown], linewidth=1, label=port)
        for row in axes:
            row[col].axvspan(0, float(it["end_ms"]) - t0, color="tab:red", alpha=0.08)
        axes[0][col].set_title(f"{variant}: iteration {it['iteration']} ({Path(run.source).name}, run "
                               f"{run.index + 1})", fontsize=9)
        axes[2][col].set_xlabel("ms from the straggler iteration's start (live)")
    axes[0][0].set_ylabel("delivered Gbit/s (live)")
    axes[1][0].set_ylabel("PRC weight")
    axes[2][0].set_ylabel("switch queue (kB)")
    for row in axes:
        for ax in row:
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
