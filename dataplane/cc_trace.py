"""`prc-emu cc trace EVENTS.csv`: a researcher's quick look at the CC core.

The CSV has a header; `time_us` and `event` (cnp, tx or advance) are
required; optional columns: `bytes` (tx), `weight`, `floor_gbps`,
`cap_gbps` (the PRC hook in force from that row on). The rate and alpha
after each event are printed as a table and plotted to a PNG.
"""
from __future__ import annotations

import csv
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dataplane.cc import EVENT_KINDS, Event, HostCC, core_params, hook, q20_fraction
from scenario.dcqcn import DcqcnConfig, ParamError

REQUIRED = ("time_us", "event")
PLOT_SAMPLES = 1000
OPTIONAL = ("bytes", "weight", "floor_gbps", "cap_gbps")


class TraceError(ValueError):
    """Bad trace input; str() is one line naming the row or column."""


@dataclass(frozen=True)
class TracePoint:
    time_us: float
    event: str
    rate_gbps: float
    target_gbps: float
    alpha: float
    t_count: int
    bc_count: int


def read_events(path: Path, config: DcqcnConfig) -> tuple[list[str], list[Event]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror})") from None
    rows = list(csv.DictReader(text.splitlines()))
    columns = set(rows[0].keys()) if rows else set()
    if not rows:
        raise TraceError(f"{path}: no events (a header line and one row per event)")
    missing = [c for c in REQUIRED if c not in columns]
    unknown = sorted(columns - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise TraceError(f"{path}: " + (f"missing column {missing[0]!r}" if missing
                                        else f"unknown column {unknown[0]!r}")
                         + f" (columns: {', '.join(REQUIRED + OPTIONAL)})")
    names, events = [], []
    line_gbps = config.line_rate_gbps
    weight, floor, cap, last_t = 1.0, 0.0, 0.0, None
    for number, row in enumerate(rows, start=2):
        where = f"{path}:{number}"
        kind = (row["event"] or "").strip()
        if kind not in EVENT_KINDS:
            raise TraceError(f"{where}: event must be one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        t_us = _number(row, "time_us", where)
        if t_us < 0 or (last_t is not None and t_us < last_t):
            raise TraceError(f"{where}: time_us must be >= 0 and never decrease")
        last_t = t_us
        nbytes = int(_number(row, "bytes", where, 0))
        if not 0 <= nbytes < 2**32:
            raise TraceError(f"{where}: bytes must be 0..2^32-1")
        weight = _number(row, "weight", where, weight)
        floor = _number(row, "floor_gbps", where, floor * line_gbps) / line_gbps
        cap = _number(row, "cap_gbps", where, cap * line_gbps) / line_gbps
        if weight <= 0 or not 0 <= floor <= 1 or not 0 <= cap <= 1:
            raise TraceError(f"{where}: weight must be > 0, floor_gbps and cap_gbps within 0..line rate")
        names.append(kind)
        events.append(Event(kind=EVENT_KINDS[kind], bytes=nbytes, now_ns=round(t_us * 1000),
                            hook=hook(weight, floor, cap)))
    return names, events


def _number(row: dict, column: str, where: str, default: float | None = None) -> float:
    value = (row.get(column) or "").strip()
    if not value:
        if default is None:
            raise TraceError(f"{where}: {column} is empty")
        return default
    try:
        return float(value)
    except ValueError:
        raise TraceError(f"{where}: {column} must be a number, got {value!r}") from None


def run_points(names: list[str], events: list[Event], config: DcqcnConfig) -> list[TracePoint]:
    states = HostCC().run(core_params(config), events)
    gbps = config.line_rate_gbps
    return [TracePoint(ev.now_ns / 1000, name, q20_fraction(st.rc) * gbps, q20_fraction(st.rt) * gbps,
                       q20_fraction(st.alpha),
                       st.t_count, st.bc_count)
            for name, ev, st in zip(names, events, states)]


def with_samples(names: list[str], events: list[Event], samples: int) -> tuple[list[str], list[Event]]:
    """The events plus `samples` timer-only looks at the rate spread over
    their span: timers apply lazily, so only looks show the trajectory
    between events. Each look carries the hook in force at its time."""
    start, end = events[0].now_ns, events[-1].now_ns
    grid = [start + (end - start) * i // samples for i in range(1, samples)] if end > start else []
    out_names, out_events, i = [], [], 0
    for t in grid:
        while i < len(events) and events[i].now_ns <= t:
            out_names.append(names[i])
            out_events.append(events[i])
            i += 1
        out_names.append("advance")
        out_events.append(Event(kind=EVENT_KINDS["advance"], now_ns=t, hook=out_events[-1].hook))
    return out_names + names[i:], out_events + events[i:]


def plot(points: list[TracePoint], line_rate_gbps: float, out: Path) -> None:
    """Rate and target over time, CNPs marked; written atomically."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = [p.time_us for p in points]
    fig, (ax_rate, ax_alpha) = plt.subplots(2, 1, sharex=True, figsize=(8, 5),
                                            gridspec_kw={"height_ratios": [3, 1]})
    ax_rate.step(times, [p.rate_gbps for p in points], where="post", label="rate (Rc)")
    ax_rate.step(times, [p.target_gbps for p in points], where="post", linestyle="--",
                 label="target (Rt)")
    cnps = [p for p in points if p.event == "cnp"]
    ax_rate.plot([p.time_us for p in cnps], [p.rate_gbps for p in cnps], "rv", markersize=4, label="CNP")
    ax_rate.set_ylim(0, line_rate_gbps * 1.05)
    ax_rate.set_ylabel("Gb/s")
    ax_rate.legend(loc="lower right")
    ax_alpha.step(times, [p.alpha for p in points], where="post", color="tab:gray")
    ax_alpha.set_ylim(0, 1.05)
    ax_alpha.set_ylabel("alpha")
    ax_alpha.set_xlabel("time (us)")
    fig.tight_layout()
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=out.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, out)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(csv_path: str, png: str | None, line_rate_gbps: float, overrides: list[str]) -> int:
    import sys

    path = Path(csv_path)
    try:
        config = _config(line_rate_gbps, overrides)
        names, events = read_events(path, config)
        points = run_points(names, events, config)
    except (TraceError, ParamError) as exc:
        print(f"prc-emu: {exc}", file=sys.stderr)
        return 2
    print(f"{'time_us':>12} {'event':<8} {'rate_gbps':>10} {'target_gbps':>11} {'alpha':>7} {'T':>5} {'BC':>5}")
    for p in points:
        print(f"{p.time_us:>12.3f} {p.event:<8} {p.rate_gbps:>10.3f} {p.target_gbps:>11.3f} "
              f"{p.alpha:>7.4f} {p.t_count:>5} {p.bc_count:>5}")
    out = Path(png) if png else path.with_suffix(".png")
    plot(run_points(*with_samples(names, events, PLOT_SAMPLES), config), config.line_rate_gbps, out)
    print(f"plot: {out}")
    return 0


def _config(line_rate_gbps: float, overrides: list[str]) -> DcqcnConfig:
    values: dict[str, float | int] = {"line_rate_gbps": line_rate_gbps}
    known = DcqcnConfig.field_names()
    for item in overrides:
        name, sep, value = item.partition("=")
        if not sep or name not in known:
            raise ParamError(f"--param {item!r}: expected NAME=VALUE with NAME one of {', '.join(known)}")
        try:
            number = float(value)
        except ValueError:
            raise ParamError(f"{name}: must be a number, got {value!r}") from None
        default = getattr(DcqcnConfig, name)
        values[name] = int(number) if isinstance(default, int) and number.is_integer() else number
    config = DcqcnConfig(**values)
    config.validate()
    return config
