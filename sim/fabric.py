"""The switch egress ports of a planned topology (testbed.topology, the
same plan the live testbed builds) as arrays for the fluid model, and
each connection's path through them. Rates and delays are the plan's,
so in the time scale of the scenario's live runs (x dilation)."""
from __future__ import annotations

import hashlib

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
        self._last_hop: dict[str, int] = {}                   # host -> the port facing it
        self._next: dict[str, list[tuple[int, str]]] = {}     # switch -> [(port, the switch it leads to)]
        for i, (port, peer) in enumerate(ends):
            if peer.node in switches:
                self._next.setdefault(port.node, []).append((i, peer.node))
            else:
                self._last_hop[peer.node] = i
        self._hops_to: dict[str, dict[str, int]] = {}         # rack switch -> switch -> hops to it
        red = live.red
        headroom = plan.pfc_headroom_bytes()
        self.buffer = float(sc.buffer_bytes)
        self.kmin, self.kmax, self.pmax = float(red.kmin_bytes), float(red.kmax_bytes), red.pmax
        self.lossless = red.lossless
        self.xoff = float(red.xoff(sc.buffer_bytes, headroom))
        self.xon = float(red.xon(sc.buffer_bytes, headroom))

    def __len__(self) -> int:
        return len(self.names)

    def _hops(self, target: str) -> dict[str, int]:
        """Each switch's distance in hops to switch target (breadth first)."""
        if target not in self._hops_to:
            hops, frontier = {target: 0}, [target]
            while frontier:
                reached = []
                for node in frontier:
                    for _port, nb in self._next.get(node, ()):
                        if nb not in hops:
                            hops[nb] = hops[node] + 1
                            reached.append(nb)
                frontier = reached
            self._hops_to[target] = hops
        return self._hops_to[target]

    def path(self, src: str, dst: str, flow: tuple) -> list[int]:
        """The ports a connection src -> dst crosses, in order: a shortest
        path between their racks' switches, where several next hops are
        as short, ECMP picks one by a hash of `flow` and the switch
        (stable from run to run, as a switch's hash of the 5-tuple is)."""
        node, target = self.plan.host_switch[src], self.plan.host_switch[dst]
        hops = self._hops(target)
        ports = []
        while node != target:
            ways = [(port, nb) for port, nb in self._next[node] if hops.get(nb, -1) == hops[node] - 1]
            # a CRC's low bits are linear in its input: two tiers would pick alike (polarised)
            pick = int.from_bytes(hashlib.blake2b(repr((flow, node)).encode(), digest_size=4).digest(), "little")
            port, node = ways[pick % len(ways)]
            ports.append(port)
        return ports + [self._last_hop[dst]]

    def red_probability(self, queue: np.ndarray) -> np.ndarray:
        """RED's marking probability for each queue (bpf/include/red.h):
        0 up to Kmin, linear to Pmax at Kmax, 1 beyond Kmax."""
        if self.kmax <= self.kmin:
            return np.where(queue > self.kmin, 1.0, 0.0)
        ramp = self.pmax * (queue - self.kmin) / (self.kmax - self.kmin)
        return np.where(queue <= self.kmin, 0.0, np.where(queue > self.kmax, 1.0, ramp))
