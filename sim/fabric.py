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
        switches = set(plan.switches)
        ends = [(port, peer) for link in plan.links for port, peer in ((link.a, link.b), (link.b, link.a))
                if port.node in switches]
        self.names = [f"{port.node}:{peer.node}" for port, peer in ends]
        self.bytes_per_ns = np.array([port.rate_bps / 8e9 for port, _peer in ends])
        # the lookups a path needs, made once (the plan's own scan every link)
        leaves = set(plan.host_switch.values())
        self._last_hop: dict[str, int] = {}                   # host -> the port facing it
        self._uplinks: dict[str, list[tuple[int, str]]] = {}  # leaf -> [(port, spine)]
        self._down: dict[tuple[str, str], int] = {}           # (spine, leaf) -> port
        for i, (port, peer) in enumerate(ends):
            if peer.node not in switches:
                self._last_hop[peer.node] = i
            elif port.node in leaves:
                self._uplinks.setdefault(port.node, []).append((i, peer.node))
            else:
                self._down[port.node, peer.node] = i
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
        src_leaf, dst_leaf = self.plan.host_switch[src], self.plan.host_switch[dst]
        if src_leaf == dst_leaf:
            return [self._last_hop[dst]]
        uplinks = self._uplinks[src_leaf]
        up, spine = uplinks[zlib.crc32(repr(flow).encode()) % len(uplinks)]
        return [up, self._down[spine, dst_leaf], self._last_hop[dst]]

    def red_probability(self, queue: np.ndarray) -> np.ndarray:
        """RED's marking probability for each queue (bpf/include/red.h):
        0 up to Kmin, linear to Pmax at Kmax, 1 beyond Kmax."""
        if self.kmax <= self.kmin:
            return np.where(queue > self.kmin, 1.0, 0.0)
        ramp = self.pmax * (queue - self.kmin) / (self.kmax - self.kmin)
        return np.where(queue <= self.kmin, 0.0, np.where(queue > self.kmax, 1.0, ramp))
