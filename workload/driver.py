"""The workload: every job's ranks as processes over one transport, each
rank a NIC process of its own (so its QPs are its own), started together
and finished when every training job has run its iterations."""
from __future__ import annotations

from workload import events as ev
from workload.futures import Process
from workload.programs import PROGRAMS, groups
from workload.rank import Mailbox, RankContext
from workload.stragglers import slowdowns
from workload.transport import Endpoint


class Workload:
    """jobs: scenario JobSpecs; dilation: datacenter time -> transport
    time (1 in the simulator); bus: where events go (one is made if
    None)."""

    def __init__(self, jobs, transport, dilation: float = 1.0, bus: ev.EventBus | None = None):
        self.jobs = {j.name: j for j in jobs}
        self.transport, self.dilation = transport, dilation
        self.bus = bus or ev.EventBus()
        self.mailbox = Mailbox()
        self.start_ns = 0
        self.slowdowns = {j.name: slowdowns(j) if j.kind == "training" else [[0.0]] * j.ranks for j in jobs}
        self.ranks: dict[tuple[str, int], RankContext] = {}
        proc = 0
        for job in jobs:
            for rank in range(job.ranks):
                self.ranks[job.name, rank] = RankContext(self, job, rank, proc, self.slowdowns[job.name][rank])
                proc += 1
        self._processes: dict[tuple[str, int], Process] = {}

    def endpoint(self, job: str, rank: int) -> Endpoint:
        return self.ranks[job, rank].endpoint

    def procs(self) -> dict[int, tuple[str, int]]:
        """NIC process -> (job, rank)."""
        return {ctx.proc: key for key, ctx in self.ranks.items()}

    def connections(self) -> list[tuple[Endpoint, Endpoint]]:
        """Every (sender, receiver) pair of processes the jobs' programs
        use, so a transport can set them up before the clock starts."""
        pairs = []
        for job in self.jobs.values():
            for rank in range(job.ranks):
                for peer in self._peers(job, rank):
                    pairs.append((self.endpoint(job.name, rank), self.endpoint(job.name, peer)))
        return list(dict.fromkeys(pairs))

    @staticmethod
    def _peers(job, rank: int) -> list[int]:
        if job.kind == "training":
            tp_group, dp_group, stage, stages = groups(job, rank)
            tp, dp, _pp = job.coords(rank)
            out = []
            for group, used in ((tp_group, job.model.tp_bytes), (dp_group, job.model.gradient_bytes)):
                if len(group) > 1 and used:
                    i = group.index(rank)
                    out.append(group[(i + 1) % len(group)])
            out += [job.rank_at(tp, dp, s) for s in (stage - 1, stage + 1) if 0 <= s < stages]
            return out
        if job.kind == "onoff" and job.collective == "alltoall":
            return [r for r in range(job.ranks) if r != rank]
        return [(rank + 1) % job.ranks]

    def start(self) -> None:
        """Start every rank's program now."""
        self.start_ns = self.transport.now_ns()
        for key, ctx in self.ranks.items():
            process = self._processes[key] = Process(PROGRAMS[ctx.job.kind](ctx))
            process.start()

    @property
    def finished(self) -> bool:
        """Every training job's ranks have run all their iterations."""
        return all(p.finished for (job, _rank), p in self._processes.items() if self.jobs[job].foreground)
