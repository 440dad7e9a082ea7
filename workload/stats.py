"""What a run's events say: each training iteration's time, which
iterations had a straggler and how much compute it added, when the job
communicated, and the statistics the results report (normal and straggler
iterations apart, the straggler's slowdown against its extra compute)."""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from workload import events as ev


@dataclass(frozen=True)
class Iteration:
    job: str
    index: int
    start_ns: int          # the first rank's start
    end_ns: int            # the last rank's end
    duration_ns: int       # from the previous iteration's end (or this one's start) to this end
    extra_compute_ns: int  # the most compute a straggler (scripted or replayed) added to one rank
    comm_start_ns: int     # the first step of any rank's communication ...
    comm_end_ns: int       # ... to the last one's end

    @property
    def straggler(self) -> bool:
        return self.extra_compute_ns > 0


# Extra compute below this fraction of the nominal is the clock, not a
# straggler: live, a compute's end fires up to ~0.5 ms (0.6% of 80 ms) late.
CLOCK_SLACK = 0.02


def extra_compute(events, job, dilation: float) -> dict[tuple[int, int], int]:
    """(rank, iteration) -> the compute time beyond nominal that the rank
    spent in the iteration (a scripted slowdown or a replayed GPU speed),
    measured from its compute events; only where there was some."""
    nominal = job.microbatches * (job.model.forward_us + job.model.backward_us) * 1000 * dilation
    spent: dict[tuple[int, int], int] = defaultdict(int)
    begun: dict[int, int] = {}
    for e in events:
        if e.job != job.name:
            continue
        if e.kind == ev.COMPUTE_START:
            begun[e.rank] = e.t_ns
        elif e.kind == ev.COMPUTE_END and e.rank in begun:
            spent[e.rank, e.iteration] += e.t_ns - begun.pop(e.rank)
    return {key: int(ns - nominal) for key, ns in spent.items() if ns - nominal > CLOCK_SLACK * nominal}


def iterations(events, job, dilation: float) -> list[Iteration]:
    """The iterations of training job `job` that every rank finished."""
    starts, ends = defaultdict(list), defaultdict(list)
    comm = defaultdict(list)
    for e in events:
        if e.job != job.name:
            continue
        if e.kind == ev.ITERATION_START:
            starts[e.iteration].append(e.t_ns)
        elif e.kind == ev.ITERATION_END:
            ends[e.iteration].append(e.t_ns)
        elif e.kind in (ev.STEP_START, ev.STEP_END):
            comm[e.iteration].append(e.t_ns)
    extra = extra_compute(events, job, dilation)
    out, previous_end = [], None
    for k in sorted(ends):
        if len(ends[k]) < job.ranks:
            break
        end = max(ends[k])
        start = min(starts[k])
        added = max(extra.get((r, k), 0) for r in range(job.ranks))
        out.append(Iteration(job.name, k, start, end, end - (previous_end if previous_end is not None else start),
                             added, min(comm[k], default=end), max(comm[k], default=end)))
        previous_end = end
    return out


def percentile(ordered: list, q: float):
    """The nearest-rank q-quantile of sorted values (the value itself)."""
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _ms(values_ns: list[int]) -> dict:
    if not values_ns:
        return {"n": 0}
    ms = sorted(v / 1e6 for v in values_ns)
    mean = statistics.fmean(ms)
    return {"n": len(ms), "mean": mean, "p50": statistics.median(ms), "p99": percentile(ms, 0.99),
            "cv": statistics.pstdev(ms) / mean if mean else 0.0}


def summarize_job(job, its: list[Iteration], dilation: float) -> dict:
    """Iteration times (live ms; datacenter = live / dilation) after the
    warm-up, normal and straggler iterations apart. Against the steady
    iteration time (the median of the normal ones: iterations that a
    straggler's aftermath slowed are a minority and do not move it):
    - amplification: each straggler iteration's slowdown as a multiple of
      the compute its straggler added (> 1: the job lost more than the
      straggler's own delay in that iteration);
    - job_amplification: the time all measured iterations lost, aftermath
      included, as a multiple of all the compute stragglers added."""
    measured = [i for i in its if i.index >= job.warmup_iterations]
    normal = [i.duration_ns for i in measured if not i.straggler]
    late = [i for i in measured if i.straggler]
    out = {"iterations_measured": len(measured), "warmup_iterations": job.warmup_iterations,
           "iteration_ms": _ms([i.duration_ns for i in measured]), "normal_ms": _ms(normal),
           "straggler_ms": _ms([i.duration_ns for i in late]),
           "straggler_iterations": [i.index for i in late], "dilation": dilation}
    if late and normal:
        steady = statistics.median(normal)
        extra = sum(i.extra_compute_ns for i in late)
        out["steady_iteration_ms"] = steady / 1e6
        out["extra_compute_ms"] = statistics.fmean(i.extra_compute_ns for i in late) / 1e6
        out["straggler_slowdown_ms"] = statistics.fmean(i.duration_ns - steady for i in late) / 1e6
        out["amplification"] = statistics.fmean((i.duration_ns - steady) / i.extra_compute_ns for i in late)
        out["job_delay_ms"] = sum(i.duration_ns - steady for i in measured) / 1e6
        out["job_amplification"] = sum(i.duration_ns - steady for i in measured) / extra
    return out


def rate_during(series: list[tuple[int, int]], windows: list[tuple[int, int]]) -> float | None:
    """Mean rate (bytes/s) of a cumulative byte series over the union of
    windows (each counted by the samples inside it); None without one."""
    moved = spent = 0
    for lo, hi in windows:
        inside = [(t, b) for t, b in series if lo <= t <= hi]
        if len(inside) >= 2:
            moved += inside[-1][1] - inside[0][1]
            spent += inside[-1][0] - inside[0][0]
    return moved / (spent / 1e9) if spent else None
