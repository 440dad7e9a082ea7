"""The fluid network: every connection (an RC QP) as a rate, advanced in
fixed time steps. A step, for all QPs at once (numpy):

1. each QP with data queued asks for its CC rate (the core's Rc), or
   what it has left to send; a QP crossing a paused port asks nothing;
2. each host's NIC port shares its line rate among its QPs in
   proportion to their processes' PRC weights, none above what it asks
   (weighted max-min, as the live port arbiter's turns do);
3. each switch egress queue takes what its QPs send and drains at its
   port's rate; in lossless mode a queue reaching Xoff pauses the QPs
   crossing it until it would drain to Xon (the live switch's rule), in
   lossy mode what overflows the buffer is lost and sent again;
4. a QP's packets are ECN-marked by RED on the queues they cross; the
   receiver answers a marked step with a CNP (at most one per QP per
   min_time_between_cnps), which reaches the sender after the path's
   feedback delay and the queues on the way;
5. the CC core (bpf/cc, host build) takes each QP's CNP and TX events
   of the step in one indexed batch, with its process's hook;
6. a message whose last byte left is visible at the receiver after the
   path's one-way delay and the queues it crossed, and complete at the
   sender one one-way delay later (the ACK's way back).

All bytes are payload except queues and rates on the wire, which add
each packet's headers. Times are ns in the scenario's live scale
(datacenter x dilation), like the live runs' results."""
from __future__ import annotations

from collections import deque

import numpy as np

from dataplane.cc import EV_CNP, EV_TX, EVENT_DTYPE, RATE_ONE, STATE_DTYPE, WEIGHT_ONE, HostCC, core_params, hook
from scenario.live import ROCE_HEADROOM

ETHERNET_HEADER = 14
TX_UNIT_BYTES = 32              # the RNIC's TX byte counter unit (bpf/include/nic_logic.h)
NEVER = np.inf


def weighted_shares(group: np.ndarray, weight: np.ndarray, demand: np.ndarray, capacity: float,
                    groups: int, rounds: int = 16) -> np.ndarray:
    """Weighted max-min shares of `capacity` per group: each member gets
    at most its demand, the rest is split in proportion to weight among
    those wanting more (water-filling, one round per level reached)."""
    if (np.bincount(group, demand, minlength=groups) <= capacity).all():
        return demand.copy()                     # no port oversubscribed: each gets what it asks
    alloc = np.zeros(len(demand))
    want = demand > 0
    left = np.full(groups, float(capacity))
    for _ in range(rounds):
        if not want.any():
            break
        wsum = np.bincount(group[want], weight[want], minlength=groups)
        share = np.zeros(len(demand))
        share[want] = left[group[want]] * weight[want] / wsum[group[want]]
        sated = want & (demand <= share)
        if not sated.any():
            alloc[want] = share[want]
            break
        alloc[sated] = demand[sated]
        left -= np.bincount(group[sated], demand[sated], minlength=groups)
        want &= ~sated
    return alloc


class Hooks:
    """The per-process PRC hooks (weight, floor, cap), as the controller
    writes them (dataplane.hooks.HookMap's set)."""

    def __init__(self, procs: int):
        self.weight = np.full(procs, WEIGHT_ONE, dtype=np.uint32)
        self.floor = np.zeros(procs, dtype=np.uint32)
        self.cap = np.zeros(procs, dtype=np.uint32)

    def set(self, proc: int, weight: float = 1.0, floor_frac: float = 0.0, cap_frac: float = 0.0) -> None:
        h = hook(weight, floor_frac, cap_frac)
        self.weight[proc], self.floor[proc], self.cap[proc] = h.weight, h.rate_floor, h.rate_cap


class FluidNetwork:
    def __init__(self, fabric, live, dilation: float, line_bps: float, hooks: Hooks, seed: int, cc: HostCC | None = None):
        self.fabric, self.hooks = fabric, hooks
        self.cc = cc or HostCC()
        self.params = core_params(live.dcqcn, dilation)
        self.line = line_bps / 8e9                      # wire bytes per ns
        self.packet_payload = live.roce_mtu
        self.wire_factor = (live.roce_mtu + ROCE_HEADROOM + ETHERNET_HEADER) / live.roce_mtu
        self.cnp_interval_ns = live.min_time_between_cnps_us * 1000 * dilation
        self.rng = np.random.default_rng(seed)
        ports = len(fabric)
        self.queue = np.zeros(ports)                    # wire bytes
        self.paused_until = np.zeros(ports)
        self.pause_events, self.paused_ns, self.dropped_bytes = 0, 0.0, 0.0
        self.qps: list[deque] = []                      # per QP: its messages (end offset, on_sent, on_received)
        self._host_ids: dict[str, int] = {}
        self.fresh_starts = 0
        self.cc_events = 0                           # events the CC core took
        for name in self._FLOAT:
            setattr(self, name, np.empty(0))
        for name in self._INT + ("hop_qp", "hop_port"):
            setattr(self, name, np.empty(0, np.int64))
        self.states = np.zeros(0, STATE_DTYPE)
        self._new_rows: list[dict] = []            # connections not yet in the arrays

    # -- connections and messages
    _FLOAT = ("posted", "sent", "head_end", "carry", "cnp_due", "last_cnp", "visible_floor", "ce_packets",
              "dropped", "one_way", "feedback")
    _INT = ("host", "proc", "cnps", "messages")

    def add_qp(self, src: str, dst: str, proc: int, flow: tuple) -> int:
        """A connection src -> dst owned by NIC process proc; its index."""
        plan = self.fabric.plan
        qp = len(self.qps)
        self.qps.append(deque())
        host = self._host_ids.setdefault(src, len(self._host_ids))
        row = {"posted": 0.0, "sent": 0.0, "head_end": NEVER, "carry": 0.0, "cnp_due": NEVER, "last_cnp": -NEVER,
               "visible_floor": 0.0, "ce_packets": 0.0, "dropped": 0.0,
               "one_way": float(plan.one_way_delay_ns(src, dst)), "feedback": float(plan.feedback_delay_ns(src, dst)),
               "host": host, "proc": proc, "cnps": 0, "messages": 0}
        path = self.fabric.path(src, dst, flow)
        row.update(hop_qp=[qp] * len(path), hop_port=path)
        self._new_rows.append(row)
        return qp

    def _take_new_rows(self) -> None:
        """Append the connections made since the last call to the arrays,
        all at once."""
        rows, self._new_rows = self._new_rows, []
        if not rows:
            return
        for name in rows[0]:
            values = [v for row in rows for v in (row[name] if isinstance(row[name], list) else [row[name]])]
            column = getattr(self, name)
            setattr(self, name, np.concatenate([column, np.asarray(values, column.dtype)]))
        states = np.zeros(len(self.qps), STATE_DTYPE)     # (concatenating loses the C struct's dtype)
        states[:len(self.states)] = self.states
        self.states = states

    def post(self, qp: int, nbytes: int, fresh: bool, on_sent, on_received) -> None:
        self._take_new_rows()
        if fresh and self.posted[qp] <= self.sent[qp]:
            self.states[qp] = np.zeros(1, STATE_DTYPE)[0]      # the core starts a zeroed record at line rate
            self.fresh_starts += 1
        self.posted[qp] += nbytes
        self.qps[qp].append((self.posted[qp], on_sent, on_received))
        if self.head_end[qp] == NEVER:
            self.head_end[qp] = self.posted[qp]

    def busy(self) -> bool:
        self._take_new_rows()
        return bool((self.posted > self.sent).any())

    # -- time
    def idle(self, t: float, until: float) -> None:
        """Nothing to send from t to until: the queues drain."""
        self.queue = np.maximum(0.0, self.queue - self.fabric.bytes_per_ns * (until - t))

    def step(self, t: float, dt: float, clock) -> None:
        """Advance from t to t + dt; completions go to clock.call_at."""
        fab, end = self.fabric, t + dt
        backlog = self.posted - self.sent
        paused = self.paused_until > t
        blocked = np.zeros(len(backlog), bool)
        blocked[self.hop_qp[paused[self.hop_port]]] = True
        rc = self.states["common"]["rc"].astype(float)
        rate = np.where(rc > 0, rc, RATE_ONE) / RATE_ONE * self.line / self.wire_factor   # payload bytes/ns
        demand = np.where((backlog > 0) & ~blocked, np.minimum(rate, backlog / dt), 0.0)
        weight = self.hooks.weight[self.proc].astype(float)
        alloc = weighted_shares(self.host, np.where(weight > 0, weight, WEIGHT_ONE), demand,
                                self.line / self.wire_factor, len(self._host_ids))
        moved = alloc * dt                                                   # payload bytes this step
        inflow = np.bincount(self.hop_port, moved[self.hop_qp] * self.wire_factor, minlength=len(fab))
        queue = np.maximum(0.0, self.queue + inflow - fab.bytes_per_ns * dt)
        over = np.maximum(0.0, queue - fab.buffer)
        if over.any():
            queue = np.minimum(queue, fab.buffer)
            if not fab.lossless:            # lost in proportion to what each QP brought, sent again
                share = np.divide(over, inflow, out=np.zeros_like(over), where=inflow > 0)
                lost = np.bincount(self.hop_qp, share[self.hop_port] * moved[self.hop_qp] * self.wire_factor,
                                   minlength=len(moved)) / self.wire_factor
                lost = np.minimum(lost, moved)
                moved -= lost
                self.dropped += lost
                self.dropped_bytes += float(lost.sum())
        if fab.lossless:
            starts = (queue >= fab.xoff) & (self.paused_until <= end)
            if starts.any():
                until = end + (queue[starts] - fab.xon) / fab.bytes_per_ns[starts]
                self.paused_until[starts] = until
                self.pause_events += int(starts.sum())
                self.paused_ns += float((until - end).sum())
        self.queue = queue
        delay = np.bincount(self.hop_qp, (queue / fab.bytes_per_ns)[self.hop_port], minlength=len(moved))
        self._mark(moved, queue, end, delay)
        self._cc_events(moved, end)
        self._complete(moved, t, dt, delay, clock)

    def _mark(self, moved: np.ndarray, queue: np.ndarray, end: float, delay: np.ndarray) -> None:
        """ECN marks on what moved; a CNP for a QP with a mark, at most one
        per interval, due at its sender after the feedback delay."""
        p = np.minimum(self.fabric.red_probability(queue), 1.0 - 1e-12)
        log_clear = np.bincount(self.hop_qp, np.log1p(-p)[self.hop_port], minlength=len(moved))
        packets = moved / self.packet_payload
        self.ce_packets += packets * -np.expm1(log_clear)
        marked = self.rng.random(len(moved)) < -np.expm1(packets * log_clear)     # >= 1 mark in the step
        cnp = marked & (moved > 0) & (end - self.last_cnp >= self.cnp_interval_ns)
        if cnp.any():
            self.last_cnp[cnp] = end
            self.cnps[cnp] += 1
            due = end + self.feedback[cnp] + delay[cnp]
            self.cnp_due[cnp] = np.minimum(self.cnp_due[cnp], due)          # one in flight: merged

    def _cc_events(self, moved: np.ndarray, end: float) -> None:
        """Each QP's CNP that arrived, then its bytes sent, into the core."""
        cnp = np.nonzero(self.cnp_due <= end)[0]
        # wire bytes in 32-byte units, the rest carried: as the RNIC and DOCA PCC count them
        total = moved * self.wire_factor + self.carry
        sent_bytes = np.floor(total / TX_UNIT_BYTES) * TX_UNIT_BYTES
        self.carry = total - sent_bytes
        tx = np.nonzero(sent_bytes > 0)[0]
        qp = np.concatenate([cnp, tx])
        if not len(qp):
            return
        events = np.zeros(len(qp), EVENT_DTYPE)
        events["kind"][:len(cnp)] = EV_CNP
        events["now_ns"][:len(cnp)] = self.cnp_due[cnp].astype(np.uint64)
        events["kind"][len(cnp):] = EV_TX
        events["bytes"][len(cnp):] = np.minimum(sent_bytes[tx], 0xFFFFFFFF).astype(np.uint32)
        events["now_ns"][len(cnp):] = np.uint64(end)
        procs = self.proc[qp]
        events["hook"]["weight"] = self.hooks.weight[procs]
        events["hook"]["rate_floor"] = self.hooks.floor[procs]
        events["hook"]["rate_cap"] = self.hooks.cap[procs]
        self.cnp_due[cnp] = NEVER
        self.cc.apply_indexed(self.params, self.states, events, qp)
        self.cc_events += len(qp)

    def _complete(self, moved: np.ndarray, t: float, dt: float, delay: np.ndarray, clock) -> None:
        self.sent += moved
        for qp in np.nonzero(self.sent >= self.head_end - 1e-6)[0]:
            before = self.sent[qp] - moved[qp]
            messages = self.qps[qp]
            while messages and self.sent[qp] >= messages[0][0] - 1e-6:
                end_offset, on_sent, on_received = messages.popleft()
                self.messages[qp] += 1
                left = (end_offset - before) / moved[qp] if moved[qp] > 0 else 1.0
                last_byte = t + dt * min(1.0, max(0.0, left))
                visible = max(int(last_byte + self.one_way[qp] + delay[qp]), int(self.visible_floor[qp]))
                self.visible_floor[qp] = visible
                acked = visible + int(self.one_way[qp])
                clock.call_at(visible, lambda on_received=on_received, visible=visible: on_received(visible))
                clock.call_at(acked, lambda on_sent=on_sent, acked=acked: on_sent(acked))
            if messages:
                self.head_end[qp] = messages[0][0]
            else:
                self.head_end[qp] = NEVER
                self.sent[qp] = self.posted[qp]         # no float residue left queued

    def delivered_by_proc(self, procs: int) -> np.ndarray:
        """Payload bytes each process's QPs have sent."""
        self._take_new_rows()
        return np.bincount(self.proc, self.sent, minlength=procs)
