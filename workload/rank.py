"""What a rank program sees: its job, its place in the parallel groups,
and the verbs it waits on -- compute (a timer), send and recv (messages
over the transport, split into the job's chunks), a point in time -- each
reported on the event bus."""
from __future__ import annotations

from workload import events as ev
from workload.futures import Future, all_of
from workload.transport import Endpoint


class Mailbox:
    """Bytes that arrived per (receiver, sender, tag) and the receive
    waiting for them: data may be visible before its receiver asks."""

    def __init__(self):
        self._slots: dict[tuple, list] = {}     # key -> [bytes arrived, bytes wanted, future]

    def _slot(self, key):
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = [0, None, Future()]
        return slot

    def deliver(self, key, nbytes: int, t_ns: int) -> None:
        slot = self._slot(key)
        slot[0] += nbytes
        self._check(key, slot, t_ns)

    def expect(self, key, nbytes: int, t_ns: int) -> Future:
        slot = self._slot(key)
        slot[1] = nbytes
        future = slot[2]
        self._check(key, slot, t_ns)
        return future

    def _check(self, key, slot, t_ns: int) -> None:
        if slot[1] is not None and slot[0] >= slot[1]:
            del self._slots[key]
            slot[2].resolve(t_ns)


class RankContext:
    def __init__(self, workload, job, rank: int, proc: int, slowdown: list[float]):
        self.workload, self.job, self.rank, self.proc = workload, job, rank, proc
        self.endpoint = Endpoint(job.host_of(rank), proc)
        self.slowdown = slowdown            # per iteration, extra compute as a fraction
        self.speed = job.trace.ranks[rank] if job.trace else None   # replayed compute speed, if any
        self.iteration = 0
        self.bytes_remaining = 0
        self._transport = workload.transport

    # -- events
    def emit(self, kind: str, detail: str = "") -> None:
        self.workload.bus.publish(ev.Event(self._transport.now_ns(), self.job.name, self.rank, self.proc,
                                           self.iteration, kind, detail, self.bytes_remaining))

    def step_start(self, detail: str) -> None:
        self.emit(ev.STEP_START, detail)

    def step_end(self, detail: str) -> None:
        self.emit(ev.STEP_END, detail)

    # -- verbs a program yields on
    def compute(self, us: float, detail: str = "") -> Future:
        """us of datacenter compute, slowed by this iteration's straggler
        factor and run at the replayed trace's speed, dilated to the
        transport's time."""
        w = self.workload
        work_s = us * (1 + self.slowdown[self.iteration]) / 1e6
        now = self._transport.now_ns()
        if self.speed is not None:
            begun = w.datacenter_s(now)
            work_s = self.speed.finish(begun, work_s) - begun
        self.emit(ev.COMPUTE_START, detail)
        done = self.at(now + int(work_s * 1e9 * w.dilation))
        done.then(lambda _t: self.emit(ev.COMPUTE_END, detail))
        return done

    def at(self, t_ns: int) -> Future:
        done = Future()
        self._transport.call_at(t_ns, lambda: done.resolve(t_ns))
        return done

    def send(self, dst_rank: int, nbytes: int, tag) -> Future:
        """nbytes to dst_rank in messages of at most the job's chunk size;
        resolves when the last one's send completion is visible."""
        w = self.workload
        dst = w.endpoint(self.job.name, dst_rank)
        key = (self.job.name, dst_rank, self.rank, tag)
        chunk = self.job.model.chunk_bytes
        parts = []
        left = nbytes
        while left > 0:
            size = min(chunk, left)
            left -= size
            sent = Future()
            self._transport.send(self.endpoint, dst, size, self.job.qp_state == "fresh",
                                 self._on_sent(sent, size), lambda t, size=size: w.mailbox.deliver(key, size, t))
            parts.append(sent)
        return all_of(parts)

    def _on_sent(self, future: Future, size: int):
        def sent(t_ns: int) -> None:
            self.bytes_remaining = max(0, self.bytes_remaining - size)
            future.resolve(t_ns)
        return sent

    def recv(self, src_rank: int, nbytes: int, tag) -> Future:
        """Resolves when nbytes from src_rank with this tag are visible."""
        return self.workload.mailbox.expect((self.job.name, self.rank, src_rank, tag), nbytes,
                                            self._transport.now_ns())
