"""The switch egress ports of a planned topology (testbed.topology, the
same plan the live testbed builds) as arrays for the fluid model, and
each connection's path through them. Rates and delays are the plan's,
so in the time scale of the scenario's live runs (x dilation)."""
from __future__ import annotations

import zlib

import numpy as np


class Fabric:
    def __init__(self, plan, live):
        """plan: testbed.topology.Plan; live: scenario.live.LiveCC (its
        RED/ECN and pause settings)."""
        self.plan = plan
        sc = plan.scenario
        ports = [p for node in plan.switches for p in plan.ports(node)]
        self.index = {p.ifindex: i for i, p in enumerate(ports)}
        self.names = [f"{p.node}:{plan.peer(p).node}" for p in ports]
        self.bytes_per_ns = np.array([p.rate_bps / 8e9 for p in ports])
        red = live.red
        headroom = plan.pfc_headroom_bytes()
        self.buffer = float(sc.buffer_bytes)
        self.kmin, self.kmax, self.pmax = float(red.kmin_bytes), float(red.kmax_bytes), red.pmax
        self.lossless = red.lossless
        self.xoff = float(red.xoff(sc.buffer_bytes, headroom))
        self.xon = float(red.xon(sc.buffer_bytes, headroom))

    def __len__(self) -> int:
        return len(self.names)

    def path(self, src: str, dst: str, flow: tuple) -> list[int]:
        """The ports a connection src -> dst crosses, in order. Across
        leaves, ECMP picks one spine per connection by a hash of `flow`
        (stable from run to run, as a switch's hash of the 5-tuple is)."""
        plan = self.plan
        last = plan.peer(plan.ports(dst)[0])
        src_leaf, dst_leaf = plan.host_switch[src], plan.host_switch[dst]
        if src_leaf == dst_leaf:
            return [self.index[last.ifindex]]
        uplinks = [p for p in plan.ports(src_leaf) if p.faces == "switch"]
        up = uplinks[zlib.crc32(repr(flow).encode()) % len(uplinks)]
        spine = plan.peer(up).node
        down = plan.port_towards(spine, dst_leaf)
        return [self.index[p.ifindex] for p in (up, down, last)]

    def red_probability(self, queue: np.ndarray) -> np.ndarray:
        """RED's marking probability for each queue (bpf/include/red.h):
        0 up to Kmin, linear to Pmax at Kmax, 1 beyond Kmax."""
        if self.kmax <= self.kmin:
            return np.where(queue > self.kmin, 1.0, 0.0)
        ramp = self.pmax * (queue - self.kmin) / (self.kmax - self.kmin)
        return np.where(queue <= self.kmin, 0.0, np.where(queue > self.kmax, 1.0, ramp))
