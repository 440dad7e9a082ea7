"""How late each process is, from its own progress events only: every
milestone of an iteration (compute end, each collective step's start and
end, the iteration's end) is compared with that milestone's baseline
offset from the iteration's start, the median over the process's last
`window` iterations. Between milestones a process is as late as its next
milestone is overdue, so a step stuck behind contention shows as lag
while it lasts. Lag is a fraction of the process's baseline iteration.

The median makes the transient/persistent split: one late iteration in a
window barely moves it, so a transient straggler stands out; a process
whose compute overran its baseline in most of its last `window`
iterations (a slower GPU) has moved its own baseline, is no longer late,
and is reported persistent: helping it would only move the slowdown
elsewhere. Only compute counts there: iterations made late by the
network (a job slipping among another job's bursts) are what PRC is
for, and counting them made a whole job persistent, and unhelped, after
a few slipped iterations.

Noise (`noise_mads`): where contention alone makes a process's
iterations vary, the threshold rises to that many median absolute
deviations of its last iteration times, so that jitter is not taken for
a straggler.

Where the GPU reports its speed (GPU_SAMPLE events: NVML or a replayed
trace), a process computing slower than nominal is late by what its
compute will overrun at that speed, before the milestone is overdue:
the work left (its baseline compute time less the work done at the
speeds seen) takes 1/speed as long.

Carry-over (`carry_over`): an iteration that ended late by the threshold
or more leaves its process late by that much through the next
iteration. A straggler's job comes out of its iteration behind its
schedule and meets other jobs' traffic where it used to find the links
free; its steps then fall behind only gradually, too late for the
threshold to catch, for the two or three iterations it takes to settle
again. Each of those iterations ends late, so the help lasts until one
ends on time.

Straggler episodes (`straggling`): a job's episode opens when one of its
processes' compute overruns its baseline by the threshold (a transient
straggler, not persistent) and closes once every process of the job has
ended an iteration on time, with no compute overrun, after that. Without
a straggler, contention alone never opens one, however late it makes a
process: PRC with trigger = "straggler" helps only inside them, every
process of the job by the largest lag the job has reached in the episode
(`episode_lag`)."""
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
    late_ends: deque = field(default_factory=deque)        # per recent iteration: did its compute overrun?
    compute_over_ns: float = 0.0       # this iteration's compute beyond its baselines
    speed: float = 1.0                 # the GPU's last reported speed
    computing: str | None = None       # detail of the compute under way
    compute_start_ns: int = 0
    work_ns: float = 0.0               # nominal compute done up to speed_since_ns
    speed_since_ns: int = 0
    computes: dict[str, deque] = field(default_factory=dict)   # compute detail -> its last durations (ns)
    carry: float = 0.0                 # lag (fraction) carried from a previous iteration that ended late
    spread: float = 0.0                # median absolute deviation of its last iteration times / their median
    iteration_ns: float = 0.0          # its baseline iteration (0 until it has ended one)
    compute_base_ns: float | None = None   # the baseline of the compute under way (None: none yet)

    def baseline(self, key: str) -> float:
        return statistics.median(self.seen[key])


def _relative_mad(values) -> float:
    """Median absolute deviation of values, as a fraction of their median."""
    median = statistics.median(values)
    return statistics.median(abs(v - median) for v in values) / median if median else 0.0


class LagTracker:
    def __init__(self, window: int, late_threshold: float, carry_over: bool = False, noise_mads: float = 0.0):
        self.window, self.late_threshold, self.carry_over = window, late_threshold, carry_over
        self.noise_mads = noise_mads
        self.procs: dict[int, ProcessLag] = {}
        self.job_of: dict[int, str] = {}
        self.members: dict[str, list[int]] = {}      # job -> its processes seen so far
        self._calm: dict[str, int] = {}              # job -> when it was last found with no straggler (ns)
        self._job_lag: dict[str, tuple] = {}         # job -> (when, its episode lag then): one look per instant
        self._peak: dict[str, float] = {}            # job -> the largest lag of its episode so far
        self.unsettled: dict[str, set[int]] = {}    # job -> its processes yet to end an iteration on time

    def observe(self, e: ev.Event) -> None:
        p = self.procs.setdefault(e.proc, ProcessLag())
        if e.proc not in self.job_of:
            self.job_of[e.proc] = e.job
            self.members.setdefault(e.job, []).append(e.proc)
        if e.kind in (ev.GPU_SAMPLE, ev.COMPUTE_START, ev.COMPUTE_END):
            self._observe_compute(p, e)
        if e.kind == ev.ITERATION_START:
            p.iteration, p.start_ns, p.position, p.lag_ns, p.worst_ns = e.iteration, e.t_ns, -1, 0.0, 0.0
            p.compute_over_ns = 0.0
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
            p.iteration_ns = p.baseline(key)
            p.spread = _relative_mad(p.seen[key])
            end_lag = self._fraction(p, p.lag_ns) if self._learned(p) else 0.0
            p.carry = end_lag if self.carry_over and end_lag >= self.threshold(p) else 0.0
            compute_over = self._fraction(p, p.compute_over_ns)
            if end_lag < self.threshold(p) and compute_over < self.threshold(p):
                self._settle(e.job, e.proc)
            p.ended += 1
            p.late_ends.append(compute_over >= self.late_threshold)
            if len(p.late_ends) > self.window:
                p.late_ends.popleft()

    def _observe_compute(self, p: ProcessLag, e: ev.Event) -> None:
        if e.kind == ev.COMPUTE_START:
            p.computing, p.compute_start_ns, p.work_ns, p.speed_since_ns = e.detail, e.t_ns, 0.0, e.t_ns
            durations = p.computes.get(e.detail)
            p.compute_base_ns = statistics.median(durations) if durations else None
        elif e.kind == ev.GPU_SAMPLE:
            p.work_ns += (e.t_ns - p.speed_since_ns) * p.speed
            p.speed, p.speed_since_ns = e.speed, e.t_ns
        elif p.computing is not None:
            durations = p.computes.setdefault(p.computing, deque(maxlen=self.window))
            took = e.t_ns - p.compute_start_ns
            if durations:
                p.compute_over_ns += max(0.0, took - statistics.median(durations))
            durations.append(took)
            p.computing = None

    def _overrun_ns(self, p: ProcessLag, now_ns: int) -> float:
        """How much later than its baseline the compute under way will end
        at the GPU's reported speed (0 at full speed or with no baseline)."""
        if p.computing is None or p.speed >= 1.0 or p.compute_base_ns is None:
            return 0.0
        base = p.compute_base_ns
        done = p.work_ns + (now_ns - p.speed_since_ns) * p.speed
        return (now_ns - p.compute_start_ns) + max(0.0, base - done) / p.speed - base

    def _settle(self, job: str, proc: int) -> None:
        unsettled = self.unsettled.get(job)
        if unsettled is not None:
            unsettled.discard(proc)
            if not unsettled:
                del self.unsettled[job]
                self._peak.pop(job, None)

    def compute_lag(self, proc: int, now_ns: int) -> float:
        """How far proc's compute in this iteration has overrun its
        baselines so far (computes done, and the one under way: overdue,
        or late at the GPU's reported speed), a fraction of its iteration."""
        p = self.procs.get(proc)
        if p is None or not self._learned(p):
            return 0.0
        over = p.compute_over_ns
        if p.computing is not None and p.compute_base_ns is not None:
            overdue = now_ns - p.compute_start_ns - p.compute_base_ns
            if overdue > 0 or p.speed < 1.0:
                over += max(0.0, overdue, self._overrun_ns(p, now_ns))
        return self._fraction(p, over) if over else 0.0

    def straggling(self, proc: int, now_ns: int) -> bool:
        """Whether proc's job is in a straggler episode: opened (now, if
        not before) by a process of the job whose compute has overrun by
        the threshold, and not yet closed by every process of the job
        ending an iteration on time."""
        job = self.job_of.get(proc)
        if job in self.unsettled:
            return True
        if job is None:
            return False
        # proc itself, then (once per instant: ticks ask for every process) the whole job
        if self._straggles(proc, now_ns) or (self._calm.get(job) != now_ns
                                              and any(self._straggles(q, now_ns) for q in self.members[job])):
            self.unsettled[job] = set(self.members[job])
            return True
        self._calm[job] = now_ns
        return False

    def _straggles(self, proc: int, now_ns: int) -> bool:
        return self.compute_lag(proc, now_ns) >= self.threshold(self.procs[proc]) and not self.persistent(proc)

    def episode_lag(self, proc: int, now_ns: int) -> float | None:
        """In a straggler episode of proc's job, the largest lag any of its
        transiently late processes (the straggler, or a rank waiting on
        it) has reached in the episode: in a ring every rank of the delayed
        iteration is on its critical path, so each is as late as the job,
        and it stays so until the job is on time again. None outside an
        episode or before any process of it is late."""
        job = self.job_of.get(proc)
        if not self.straggling(proc, now_ns):
            return None
        at, lag = self._job_lag.get(job, (None, None))
        if at != now_ns:
            lags = [x for x in (self.late_lag(q, now_ns) for q in self.members[job]) if x is not None]
            peak = max(lags + [self._peak.get(job, 0.0)])
            self._peak[job] = peak
            lag = peak if peak > 0 else None
            self._job_lag[job] = (now_ns, lag)
        return lag

    def _learned(self, p: ProcessLag) -> bool:
        return p.ended >= MIN_ITERATIONS

    def threshold(self, p: ProcessLag) -> float:
        """The lag that makes p late: late_threshold, or noise_mads median
        absolute deviations of its last iterations' durations (as a
        fraction of their median) where that is more."""
        return max(self.late_threshold, self.noise_mads * p.spread)

    def _fraction(self, p: ProcessLag, lag_ns: float) -> float:
        return lag_ns / p.iteration_ns if p.iteration_ns else 0.0

    def lag(self, proc: int, now_ns: int) -> float:
        """How late proc is now, as a fraction of its baseline iteration
        (0 before it has one, or once it has finished the iteration); at
        least what its previous iteration carried over."""
        p = self.procs.get(proc)
        if p is None or not self._learned(p) or p.iteration < 0 or p.position == len(p.order) - 1:
            return 0.0
        lag = p.lag_ns + max(0.0, self._overrun_ns(p, now_ns))
        if p.position + 1 < len(p.order):
            lag = max(lag, now_ns - p.start_ns - p.baseline(p.order[p.position + 1]))
        return max(0.0, self._fraction(p, lag), p.carry)

    def persistent(self, proc: int) -> bool:
        """Its compute overran in most of its last `window` iterations."""
        p = self.procs.get(proc)
        return p is not None and sum(p.late_ends) > self.window // 2

    def late_lag(self, proc: int, now_ns: int) -> float | None:
        """proc's lag if it is transiently late (lagging by the threshold
        and not persistent), else None."""
        lag = self.lag(proc, now_ns)
        p = self.procs.get(proc)
        return lag if p is not None and lag >= self.threshold(p) and not self.persistent(proc) else None

    def late(self, proc: int, now_ns: int) -> bool:
        return self.late_lag(proc, now_ns) is not None
