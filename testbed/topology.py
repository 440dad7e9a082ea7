"""The emulated cluster as data: nodes, links with addresses and MACs, and
routes, planned from a Scenario before anything is created, by the
scenario's topology kind (TOPOLOGIES: a registry, as Mininet keeps its
topology classes).

Address plan (all in 198.18.0.0/15, RFC 2544): every link is a /31.
  host j of switch l:     198.18.l.(2j+1), switch side 198.18.l.(2j)
  leaf l - spine s link:  198.19.s.(2l+1) on the leaf, 198.19.s.(2l) on the spine
so the hosts of leaf l are 198.18.l.0/24, one route per leaf on the spines
and one ECMP route per remote leaf on the leaves.
"""
from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field

from scenario.spec import Scenario

IFNAME_MAX = 15
FIRST_IFINDEX = 1000   # well above lo (1) in every namespace


def live_rate_bps(scenario: Scenario, gbps: float | None = None) -> int:
    """A link rate as the testbed runs it: datacenter rate / dilation
    (host links unless gbps is given)."""
    return int((scenario.rate_gbps if gbps is None else gbps) * 1e9 / scenario.dilation)


def live_delay_ns(scenario: Scenario) -> int:
    """One link's propagation delay as the testbed runs it: datacenter
    delay x dilation."""
    return int(scenario.delay_ns * scenario.dilation)


@dataclass(frozen=True)
class Port:
    node: str          # node name (h0, s1, ...)
    ifname: str        # interface name inside the node's namespace
    addr: str          # IPv4 address, /31
    mac: str
    rate_bps: int      # live egress rate (dilated)
    faces: str         # "host" or "switch": what is at the other end
    ifindex: int       # unique across the testbed: BPF maps shared by all
                       # namespaces key ports by it


@dataclass(frozen=True)
class Link:
    a: Port
    b: Port


@dataclass(frozen=True)
class Route:
    node: str
    dst: str                          # prefix, or "default"
    nexthops: tuple[tuple[str, str], ...]   # (gateway address, ifname); several = ECMP


@dataclass
class Plan:
    prefix: str
    scenario: Scenario
    kind: TopologyKind                 # owns the plan's shape, paths and hop counts
    hosts: list[str]
    switches: list[str]
    links: list[Link] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    host_switch: dict[str, str] = field(default_factory=dict)   # host -> its ToR/leaf

    def netns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    @property
    def nodes(self) -> list[str]:
        return self.hosts + self.switches

    def ports(self, node: str) -> list[Port]:
        return [p for link in self.links for p in (link.a, link.b) if p.node == node]

    def host_addr(self, host: str) -> str:
        return self.ports(host)[0].addr

    def peer(self, port: Port) -> Port:
        for link in self.links:
            if link.a is port:
                return link.b
            if link.b is port:
                return link.a
        raise KeyError(port.ifname)

    def port_towards(self, node: str, peer: str) -> Port:
        """node's port on its link to peer; ValueError naming what is wrong."""
        if node not in self.nodes:
            raise ValueError(f"no node {node!r} (nodes: {', '.join(self.nodes)})")
        for port in self.ports(node):
            if self.peer(port).node == peer:
                return port
        neighbours = ", ".join(self.peer(p).node for p in self.ports(node))
        raise ValueError(f"{node} has no link to {peer!r} (its neighbours: {neighbours})")

    def path_ports(self, src: str, dst: str) -> list[Port]:
        """Switch egress ports a flow src -> dst may cross (ECMP picks one
        at each tier), ending with the last hop to dst."""
        return self.kind.path_ports(self, src, dst)

    def feedback_delay_ns(self, src: str, dst: str) -> int:
        """Live time from a packet being ECN-marked to its CNP reaching the
        sender: the round trip less the sender's first link, which a packet
        crosses before a switch can mark it. Exact when the first switch
        port on the path marks; one link's delay too long for each switch
        port crossed before a later one marks."""
        return 2 * self.one_way_delay_ns(src, dst) - live_delay_ns(self.scenario)

    def one_way_delay_ns(self, src: str, dst: str) -> int:
        """Live propagation delay from src to dst: its links' delays."""
        return self.kind.links_one_way(self, src, dst) * live_delay_ns(self.scenario)

    def pfc_headroom_bytes(self) -> int:
        """What may reach a port after it pauses: the bytes on the wires of
        the longest path, twice (the pause's way back, a PFC frame's on
        a real fabric), plus a frame being sent at each end. Datacenter
        units; dilation scales rate and delay inversely, so live the same."""
        sc = self.scenario
        racks: dict[str, list[str]] = {}
        for host in self.hosts:
            racks.setdefault(self.host_switch[host], []).append(host)
        # a path's links depend on its ends' switches only: two hosts per switch stand for all
        sample = [h for hosts in racks.values() for h in hosts[:2]]
        links = max((self.kind.links_one_way(self, a, b) for a in sample for b in sample if a != b), default=1)
        per_link = sc.rate_gbps * sc.delay_ns / 8          # Gbit/s x ns = bits
        return int(2 * links * per_link + 2 * (sc.mtu_bytes + 14))


def _ifindex(link_idx: int, side: int) -> int:
    return FIRST_IFINDEX + 2 * link_idx + side


def _mac(prefix: str, link_idx: int, side: int) -> str:
    tag = int(prefix[1:], 16) & 0xFFFF
    return "02:%02x:%02x:%02x:%02x:%02x" % (tag >> 8, tag & 0xFF, link_idx >> 8, link_idx & 0xFF, side)


class TopologyKind:
    """A kind of topology owns its plan (nodes, links, addresses, routes),
    the switch ports a flow may cross and the links a packet crosses one
    way; nothing outside it assumes a tier count. Register a new kind in
    TOPOLOGIES (and name it in scenario.spec.TOPOLOGY_KINDS)."""

    name = ""

    def plan(self, scenario: Scenario, prefix: str) -> Plan:
        raise NotImplementedError

    def path_ports(self, plan: Plan, src: str, dst: str) -> list[Port]:
        raise NotImplementedError

    def links_one_way(self, plan: Plan, src: str, dst: str) -> int:
        raise NotImplementedError


class Tor(TopologyKind):
    """Every host on one switch (s0)."""

    name = "tor"

    def plan(self, scenario: Scenario, prefix: str) -> Plan:
        plan = Plan(prefix, scenario, self, list(scenario.hosts), ["s0"])
        _attach_racks(plan, ["s0"])
        return plan

    def path_ports(self, plan: Plan, src: str, dst: str) -> list[Port]:
        return [plan.peer(plan.ports(dst)[0])]

    def links_one_way(self, plan: Plan, src: str, dst: str) -> int:
        return 2


class LeafSpine(TopologyKind):
    """Racks of hosts on leaves s0..s(L-1), every leaf linked to every
    spine sL..; ECMP over the spines."""

    name = "leaf-spine"

    def plan(self, scenario: Scenario, prefix: str) -> Plan:
        leaves = [f"s{i}" for i in range(scenario.leaves)]
        spines = [f"s{scenario.leaves + i}" for i in range(scenario.spines)]
        plan = Plan(prefix, scenario, self, list(scenario.hosts), leaves + spines)
        racks = _attach_racks(plan, leaves)
        fabric_rate = live_rate_bps(scenario, scenario.fabric_rate_gbps)
        uplinks: dict[str, list[tuple[str, str]]] = {leaf: [] for leaf in leaves}
        for s, spine in enumerate(spines):
            for l, leaf in enumerate(leaves):
                idx = len(plan.links)
                leaf_port = Port(leaf, f"{prefix}{leaf}u{s}", f"198.19.{s}.{2 * l + 1}",
                                 _mac(prefix, idx, 0), fabric_rate, "switch", _ifindex(idx, 0))
                spine_port = Port(spine, f"{prefix}{spine}p{l}", f"198.19.{s}.{2 * l}",
                                  _mac(prefix, idx, 1), fabric_rate, "switch", _ifindex(idx, 1))
                plan.links.append(Link(leaf_port, spine_port))
                uplinks[leaf].append((spine_port.addr, leaf_port.ifname))
                if racks[leaf]:
                    plan.routes.append(Route(spine, f"198.18.{l}.0/24", ((leaf_port.addr, spine_port.ifname),)))
        for l, leaf in enumerate(leaves):
            for m, other in enumerate(leaves):
                if m != l and racks[other]:
                    plan.routes.append(Route(leaf, f"198.18.{m}.0/24", tuple(uplinks[leaf])))
        return plan

    def path_ports(self, plan: Plan, src: str, dst: str) -> list[Port]:
        """Every uplink of the source leaf and every spine port down to the
        destination leaf, and the last hop."""
        src_leaf, dst_leaf = plan.host_switch[src], plan.host_switch[dst]
        last_hop = [plan.peer(plan.ports(dst)[0])]
        if src_leaf == dst_leaf:
            return last_hop
        uplinks = [p for p in plan.ports(src_leaf) if p.faces == "switch"]
        downlinks = [plan.peer(p) for p in plan.ports(dst_leaf) if p.faces == "switch"]
        return uplinks + downlinks + last_hop

    def links_one_way(self, plan: Plan, src: str, dst: str) -> int:
        return 2 if plan.host_switch[src] == plan.host_switch[dst] else 4


class FatTree(TopologyKind):
    """A three-tier k-ary fat-tree (simulator only: no routes): k pods of
    k/2 edge switches s0.. (the racks) and k/2 aggregation switches, each
    edge linked to every aggregation switch of its pod; (k/2)^2 core
    switches, core j*k/2 + m linked to aggregation switch j of every pod.
    Links between switches run at the scenario's fabric rate."""

    name = "fat-tree"

    def plan(self, scenario: Scenario, prefix: str) -> Plan:
        k, half = scenario.pods, scenario.pods // 2
        edges = [f"s{i}" for i in range(k * half)]
        aggs = [f"s{k * half + i}" for i in range(k * half)]
        cores = [f"s{2 * k * half + i}" for i in range(half * half)]
        plan = Plan(prefix, scenario, self, list(scenario.hosts), edges + aggs + cores)
        _attach_racks(plan, edges, lambda _rack, _slot, link: _link_addresses(link))
        rate = live_rate_bps(scenario, scenario.fabric_rate_gbps)
        pairs = [(edges[p * half + e], aggs[p * half + j]) for p in range(k) for e in range(half) for j in range(half)]
        pairs += [(aggs[p * half + j], cores[j * half + m]) for p in range(k) for j in range(half) for m in range(half)]
        for n, (low, high) in enumerate(pairs):
            idx = len(plan.links)
            low_addr, high_addr = _link_addresses(idx)
            plan.links.append(Link(
                Port(low, f"{prefix}{low}u{n:x}", low_addr, _mac(prefix, idx, 0), rate, "switch", _ifindex(idx, 0)),
                Port(high, f"{prefix}{high}d{n:x}", high_addr, _mac(prefix, idx, 1), rate, "switch",
                     _ifindex(idx, 1))))
        return plan

    def _pod(self, plan: Plan, host: str) -> int:
        return int(plan.host_switch[host][1:]) // (plan.scenario.pods // 2)

    def path_ports(self, plan: Plan, src: str, dst: str) -> list[Port]:
        raise NotImplementedError("a fat-tree runs in the simulator only, which picks its own paths")

    def links_one_way(self, plan: Plan, src: str, dst: str) -> int:
        if plan.host_switch[src] == plan.host_switch[dst]:
            return 2
        return 4 if self._pod(plan, src) == self._pod(plan, dst) else 6


TOPOLOGIES: dict[str, TopologyKind] = {kind.name: kind for kind in (Tor(), LeafSpine(), FatTree())}


def _rack_addresses(rack: int, slot: int, _link: int) -> tuple[str, str]:
    """(host side, switch side) of a host link: a /24 per rack, so that
    one route per rack reaches its hosts."""
    return f"198.18.{rack}.{2 * slot + 1}", f"198.18.{rack}.{2 * slot}"


def _link_addresses(link: int) -> tuple[str, str]:
    """(lower side, upper side) of link number `link`: a /31 each, in
    order from 198.18.0.0, for plans without routes (65,536 links)."""
    base = ipaddress.IPv4Address("198.18.0.0") + 2 * link
    return str(base + 1), str(base)


def _attach_racks(plan: Plan, racks: list[str], addresses=_rack_addresses) -> dict[str, int]:
    """Hosts in contiguous blocks, a rack per switch, each on its own /31
    with a default route to its switch; hosts per switch. addresses(rack,
    slot, link number) -> (host side, switch side)."""
    scenario, prefix = plan.scenario, plan.prefix
    if math.ceil(len(scenario.hosts) / len(racks)) > 127:     # more than a /24 holds: the simulator's plans only
        addresses = lambda _rack, _slot, link: _link_addresses(link)
    slot = {switch: 0 for switch in racks}
    for i, host in enumerate(scenario.hosts):
        l = i * len(racks) // len(scenario.hosts)
        switch = racks[l]
        j = slot[switch]
        slot[switch] += 1
        plan.host_switch[host] = switch
        idx = len(plan.links)
        host_addr, switch_addr = addresses(l, j, idx)
        plan.links.append(Link(
            Port(host, f"{prefix}{host}", host_addr, _mac(prefix, idx, 0),
                 live_rate_bps(scenario), "switch", _ifindex(idx, 0)),
            Port(switch, f"{prefix}{switch}p{j}", switch_addr, _mac(prefix, idx, 1),
                 live_rate_bps(scenario), "host", _ifindex(idx, 1))))
        plan.routes.append(Route(host, "default", ((switch_addr, f"{prefix}{host}"),)))
    return slot


def plan_topology(scenario: Scenario, prefix: str) -> Plan:
    """Nodes, links and routes for `scenario` under the run prefix `prefix`
    (a letter and four hex digits, e.g. p3fa2), by its topology kind."""
    plan = TOPOLOGIES[scenario.kind].plan(scenario, prefix)
    for link in plan.links:
        for port in (link.a, link.b):
            assert len(port.ifname) <= IFNAME_MAX, port.ifname
            assert ipaddress.ip_address(port.addr) in ipaddress.ip_network("198.18.0.0/15")
    return plan
