"""The workload: every job's ranks as processes over one transport, each
rank a NIC process of its own (so its QPs are its own), started together
and finished when every training job has run its iterations."""
from __future__ import annotations

from workload import events as ev
from workload.futures import Process
from workload.programs import PROGRAMS, peers
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
        self.slowdowns = {j.name: slowdowns(j) for j in jobs}
        self.ranks: dict[tuple[str, int], RankContext] = {}
        proc = 0
        for job in jobs:
            for rank in range(job.ranks):
                self.ranks[job.name, rank] = RankContext(self, job, rank, proc, self.slowdowns[job.name][rank])
                proc += 1
        self._training_left = sum(j.ranks for j in jobs if j.foreground)     # ranks not yet done

    def endpoint(self, job: str, rank: int) -> Endpoint:
        return self.ranks[job, rank].endpoint

    def datacenter_s(self, t_ns: int) -> float:
        """Transport time t_ns as datacenter seconds since the start."""
        return (t_ns - self.start_ns) / (1e9 * self.dilation)

    def procs(self) -> dict[int, tuple[str, int]]:
        """NIC process -> (job, rank)."""
        return {ctx.proc: key for key, ctx in self.ranks.items()}

    def connections(self) -> list[tuple[Endpoint, Endpoint]]:
        """Every (sender, receiver) pair of processes the jobs' programs
        use, so a transport can set them up before the clock starts."""
        pairs = []
        for job in self.jobs.values():
            for rank in range(job.ranks):
                for peer in peers(job, rank):
                    pairs.append((self.endpoint(job.name, rank), self.endpoint(job.name, peer)))
        return list(dict.fromkeys(pairs))

    def start(self) -> None:
        """Start every rank's program now."""
        self.start_ns = self.transport.now_ns()
        for ctx in self.ranks.values():
            Process(PROGRAMS[ctx.job.kind](ctx), self._training_rank_done if ctx.job.foreground else None).start()

    def _training_rank_done(self) -> None:
        self._training_left -= 1

    @property
    def finished(self) -> bool:
        """Every training job's ranks have run all their iterations."""
        return self._training_left == 0
