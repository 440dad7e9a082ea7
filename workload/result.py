"""What one run of a workload recorded, live or simulated: its events,
per-process delivered bytes and switch queues over time, per-connection
counters, the fabric's pauses and drops, and the controller's writes.
experiment.workload_report turns it into a results folder."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WorkloadResult:
    line_rate_bps: int
    events: list = field(default_factory=list)             # workload.events.Event, in order
    procs: dict = field(default_factory=dict)              # NIC process -> (job, rank)
    proc_bytes: dict = field(default_factory=dict)         # proc -> [(t_ns, bytes its QPs delivered)]
    queue_bytes: dict = field(default_factory=dict)        # switch port "node:peer" -> [(t_ns, queued bytes)]
    qp_stats: list = field(default_factory=list)           # per connection: counters at the end
    pause_events: int = 0
    paused_ns: int = 0
    port_drops: int = 0
    send_errors: int = 0
    backlog_drops: int = 0                                 # the receive CPUs' backlog overflowed (machine-wide)
    fresh_starts: int = 0
    decisions: list = field(default_factory=list)          # the controller's writes: (t_ns, proc, weight, floor, lag)
    reaction_ns: list = field(default_factory=list)        # progress event -> hook write
    finished: bool = False
    wall_s: float = 0.0
    simulator: dict | None = None                          # a simulated run: its step, steps and QPs
    cc_trace: list = field(default_factory=list)           # the RNICs' CC events, when recorded (live)

    def job_bytes(self, job: str) -> list[tuple[int, int]]:
        """[(t_ns, bytes delivered by the job's QPs)], from its processes' series."""
        series = [s for proc, s in self.proc_bytes.items() if self.procs[proc][0] == job]
        return [(points[0][0], sum(b for _t, b in points)) for points in zip(*series)] if series else []
