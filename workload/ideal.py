"""A transport without congestion control: a discrete-event clock and
serial links (each host's uplink and downlink a FIFO at line rate, a
fixed delay per link). It runs a workload's schedules in milliseconds,
for checking them and for comparing the emulator against a fabric that
never marks or pauses; ranks on one host exchange data at once (NVLink
is far faster than the NIC)."""
from __future__ import annotations

import heapq
import itertools

from workload.transport import Endpoint


class IdealTransport:
    def __init__(self, rate_bps: float, link_delay_ns: int = 0):
        self.rate_bps, self.link_delay_ns = rate_bps, link_delay_ns
        self._t = 0
        self._events: list = []
        self._order = itertools.count()
        self._uplink_free: dict[str, int] = {}
        self._downlink_free: dict[str, int] = {}
        self.delivered: dict[tuple[int, int], int] = {}      # (src proc, dst proc) -> bytes

    def now_ns(self) -> int:
        return self._t

    def call_at(self, t_ns: int, fn) -> None:
        heapq.heappush(self._events, (max(t_ns, self._t), next(self._order), fn))

    def send(self, src: Endpoint, dst: Endpoint, nbytes: int, fresh: bool, on_sent, on_received) -> None:
        if src.host == dst.host:
            done = self._t
        else:
            wire = int(nbytes * 8e9 / self.rate_bps)
            up = max(self._t, self._uplink_free.get(src.host, 0))
            self._uplink_free[src.host] = up + wire
            down = max(up + self.link_delay_ns, self._downlink_free.get(dst.host, 0))
            self._downlink_free[dst.host] = down + wire
            done = down + wire + self.link_delay_ns
        self.call_at(done, lambda: self._deliver(src.proc, dst.proc, nbytes, done, on_received))
        ack = done + 2 * self.link_delay_ns if src.host != dst.host else done
        self.call_at(ack, lambda: on_sent(ack))

    def _deliver(self, src_proc: int, dst_proc: int, nbytes: int, t_ns: int, on_received) -> None:
        self.delivered[src_proc, dst_proc] = self.delivered.get((src_proc, dst_proc), 0) + nbytes
        on_received(t_ns)

    def run(self, until=None, limit_ns: int = 1 << 62) -> None:
        """Fire events in time order until none is left, until() is true
        or the clock passes limit_ns."""
        while self._events and self._events[0][0] <= limit_ns:
            t, _order, fn = heapq.heappop(self._events)
            self._t = t
            fn()
            if until is not None and until():
                return
