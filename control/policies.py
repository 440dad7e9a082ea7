"""Policies: from what the controller knows of each process to a weight
and a rate floor per process (weight 1, floor 0 is plain DCQCN). Each
sees a View and the processes to decide for (whole NIC ports: every
process of each host among them) and returns {proc: (weight, floor)} for
those it sets; a process it leaves out goes back to plain DCQCN.

- dcqcn: no process input at all.
- prc: inside a straggler episode of a job (control.inference: from a
  compute overrun of one of its processes until all are on time again),
  every process of the job gets weight 1 + gain x the largest lag the
  job has reached in the episode (up to w_max) and the floor, from its
  first late process on until the episode closes: in a ring every rank
  of a delayed iteration is on its critical path, so the whole delayed
  job is helped, against the other jobs on its links.
  Lateness from contention alone is left to DCQCN. With trigger = "lag",
  any process transiently late by its own baseline gets 1 + gain x its
  own lag, episode or not. A process on time that shares a NIC with a
  helped one gets w_yield.
- oracle: knows the injected stragglers: every rank of a job gets w_max
  (and the floor) from the start of an iteration in which one of its
  ranks straggles until that rank ends it; an upper bound to compare
  with, not a policy a NIC could run.
- mltcp: a training rank's weight grows from 1 to w_max with the
  fraction of its iteration's bytes already sent (MLTCP's bias towards
  the job closest to finishing; blind to stragglers)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class View:
    """What a policy may look at."""
    spec: object                       # scenario.control.ControlSpec
    lag: object                        # control.inference.LagTracker
    now_ns: int
    host_of: dict[int, str]            # proc -> host
    job_of: dict[int, tuple[str, int]]     # proc -> (job, rank)
    training: set[str]                 # names of the training jobs
    slowdowns: dict[str, list[list[float]]]   # job -> rank -> iteration -> added fraction
    iteration: dict[int, int]          # proc -> the iteration it is in (-1: between iterations)
    sent_fraction: dict[int, float]    # proc -> fraction of its iteration's bytes sent


def _yield_beside(view: View, procs, helped: dict[int, tuple[float, float]]) -> dict[int, tuple[float, float]]:
    """helped, plus w_yield for every other of procs on a helped one's host."""
    if view.spec.w_yield >= 1.0:
        return helped
    hosts = {view.host_of[p] for p in helped}
    out = {p: (view.spec.w_yield, 0.0) for p in procs if view.host_of[p] in hosts and p not in helped}
    out.update(helped)
    return out


def dcqcn(view: View, procs) -> dict[int, tuple[float, float]]:
    return {}


def prc(view: View, procs) -> dict[int, tuple[float, float]]:
    s = view.spec
    helped = {}
    for proc in procs:
        if s.trigger == "straggler":
            lag = view.lag.episode_lag(proc, view.now_ns)
        else:
            lag = view.lag.late_lag(proc, view.now_ns)
        if lag is not None:
            helped[proc] = (min(s.w_max, 1.0 + s.gain * lag), s.floor)
    return _yield_beside(view, procs, helped)


def oracle(view: View, procs) -> dict[int, tuple[float, float]]:
    s = view.spec
    helped = {}
    for proc in procs:
        job = view.job_of[proc][0]
        it = view.iteration.get(proc, -1)
        table = view.slowdowns.get(job)
        if it >= 0 and table and any(it < len(row) and row[it] > 0 for row in table):
            helped[proc] = (s.w_max, s.floor)
    return _yield_beside(view, procs, helped)


def mltcp(view: View, procs) -> dict[int, tuple[float, float]]:
    s = view.spec
    return {proc: (1.0 + (s.w_max - 1.0) * view.sent_fraction.get(proc, 0.0), 0.0)
            for proc in procs
            if view.job_of[proc][0] in view.training and view.iteration.get(proc, -1) >= 0}


POLICIES = {"dcqcn": dcqcn, "prc": prc, "oracle": oracle, "mltcp": mltcp}
