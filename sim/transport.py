"""The simulator's clock and workload.transport.Transport: a heap of
timers, and the fluid network advanced in fixed steps while any QP has
data to send (jumping from timer to timer while none has). A message
posted inside a step starts with the next one: sends start up to one
step late."""
from __future__ import annotations

import heapq
import itertools

from workload.transport import Endpoint


class SimTransport:
    def __init__(self, network, step_ns: float):
        self.network, self.step_ns = network, step_ns
        self._t = 0
        self._timers: list = []
        self._order = itertools.count()
        self._qps: dict[tuple[int, int], int] = {}      # (src proc, dst proc) -> QP index
        self.steps = 0

    def now_ns(self) -> int:
        return int(self._t)

    def call_at(self, t_ns: int, fn) -> None:
        heapq.heappush(self._timers, (max(t_ns, self._t), next(self._order), fn))

    def connect(self, src: Endpoint, dst: Endpoint) -> int:
        key = (src.proc, dst.proc)
        if key not in self._qps:
            self._qps[key] = self.network.add_qp(src.host, dst.host, src.proc, key)
        return self._qps[key]

    def qps(self) -> dict[tuple[int, int], int]:
        return dict(self._qps)

    def send(self, src: Endpoint, dst: Endpoint, nbytes: int, fresh: bool, on_sent, on_received) -> None:
        if src.host == dst.host:          # NVLink, not the NIC: at once
            t = self.now_ns()
            self.call_at(t, lambda: on_received(t))
            self.call_at(t, lambda: on_sent(t))
            return
        self.network.post(self.connect(src, dst), nbytes, fresh, on_sent, on_received)

    def _fire(self, upto: float, until) -> bool:
        """Fire the timers due by upto, in time order; True once until()."""
        while self._timers and self._timers[0][0] <= upto:
            t, _order, fn = heapq.heappop(self._timers)
            self._t = max(self._t, t)
            fn()
            if until():
                return True
        return False

    def run(self, until, limit_ns: float) -> bool:
        """Run until until() is true (True) or the clock passes limit_ns
        or nothing is left to happen (False)."""
        net = self.network
        while self._t <= limit_ns:
            if self._fire(self._t, until):
                return True
            if net.busy():
                end = self._t + self.step_ns
                net.step(self._t, self.step_ns, self)
                self.steps += 1
                if self._fire(end, until):
                    return True
                self._t = end
            elif self._timers:
                t_next = self._timers[0][0]
                net.idle(self._t, t_next)
                self._t = t_next
            else:
                return False
        return False
