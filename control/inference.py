"""How late each process is, from its own progress events only: every
milestone of an iteration (compute end, each collective step's start and
end, the iteration's end) is compared with that milestone's baseline
offset from the iteration's start, the median over the process's last
`window` iterations. Between milestones a process is as late as its next
milestone is overdue, so a step stuck behind contention shows as lag
while it lasts. Lag is a fraction of the process's baseline iteration.

The median makes the transient/persistent split: one late iteration in a
window barely moves it, so a transient straggler stands out; a process
late in most of its last `window` iterations (a slower GPU, a permanent
share) has moved its own baseline, is no longer late, and is reported
persistent: helping it would only move the slowdown elsewhere."""
from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

from workload import events as ev

MILESTONES = (ev.COMPUTE_END, ev.STEP_START, ev.STEP_END, ev.ITERATION_END)
MIN_ITERATIONS = 2          # iterations seen before a process has a baseline


@dataclass
class ProcessLag:
    iteration: int = -1
    start_ns: int = 0
    position: int = -1                 # index in `order` of the last milestone passed
    lag_ns: float = 0.0                # at the last milestone
    worst_ns: float = 0.0              # this iteration's largest lag so far
    seen: dict[str, deque] = field(default_factory=dict)   # milestone -> its last offsets (ns)
    order: list[str] = field(default_factory=list)         # milestones in the order first seen
    ended: int = 0                     # iterations completed
    late_ends: deque = field(default_factory=deque)        # per recent iteration: ended late?

    def baseline(self, key: str) -> float:
        return statistics.median(self.seen[key])


class LagTracker:
    def __init__(self, window: int, late_threshold: float):
        self.window, self.late_threshold = window, late_threshold
        self.procs: dict[int, ProcessLag] = {}

    def observe(self, e: ev.Event) -> None:
        p = self.procs.setdefault(e.proc, ProcessLag())
        if e.kind == ev.ITERATION_START:
            p.iteration, p.start_ns, p.position, p.lag_ns, p.worst_ns = e.iteration, e.t_ns, -1, 0.0, 0.0
            return
        if e.kind not in MILESTONES or e.iteration != p.iteration:
            return
        key = f"{e.kind}:{e.detail}"
        offset = e.t_ns - p.start_ns
        if key not in p.seen:
            p.seen[key] = deque(maxlen=self.window)
            if not p.ended:
                p.order.append(key)
        if self._learned(p):
            p.lag_ns = offset - p.baseline(key)
            p.worst_ns = max(p.worst_ns, p.lag_ns)
        if key in p.order:
            p.position = p.order.index(key)
        p.seen[key].append(offset)
        if e.kind == ev.ITERATION_END:
            p.ended += 1
            p.late_ends.append(self._fraction(p, p.worst_ns) >= self.late_threshold)
            if len(p.late_ends) > self.window:
                p.late_ends.popleft()

    def _learned(self, p: ProcessLag) -> bool:
        return p.ended >= MIN_ITERATIONS

    def _fraction(self, p: ProcessLag, lag_ns: float) -> float:
        iteration = p.baseline(p.order[-1]) if p.ended else 0.0
        return lag_ns / iteration if iteration else 0.0

    def lag(self, proc: int, now_ns: int) -> float:
        """How late proc is now, as a fraction of its baseline iteration
        (0 before it has one, or once it has finished the iteration)."""
        p = self.procs.get(proc)
        if p is None or not self._learned(p) or p.iteration < 0 or p.position == len(p.order) - 1:
            return 0.0
        lag = p.lag_ns
        if p.position + 1 < len(p.order):
            lag = max(lag, now_ns - p.start_ns - p.baseline(p.order[p.position + 1]))
        return max(0.0, self._fraction(p, lag))

    def persistent(self, proc: int) -> bool:
        """Late in most of its last `window` iterations."""
        p = self.procs.get(proc)
        return p is not None and sum(p.late_ends) > self.window // 2

    def late(self, proc: int, now_ns: int) -> bool:
        """Transiently late: lagging by the threshold and not persistent."""
        return not self.persistent(proc) and self.lag(proc, now_ns) >= self.late_threshold
