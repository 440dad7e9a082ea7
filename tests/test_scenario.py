"""Scenario validation and the topology plan: pure data, no root needed."""
import ipaddress
import subprocess
import sys
from pathlib import Path

import pytest

from bad_input import assert_names_key
from scenario.spec import load_scenario, parse_scenario
from testbed.topology import IFNAME_MAX, live_delay_ns, live_rate_bps, plan_topology

REPO = Path(__file__).resolve().parent.parent


def test_default_example_is_a_4_host_tor_at_1_gbit_live():
    sc = load_scenario(REPO / "examples/default.toml")
    assert (sc.kind, sc.hosts, sc.leaves, sc.spines) == ("tor", ("h0", "h1", "h2", "h3"), 1, 0)
    assert live_rate_bps(sc) == 1_000_000_000
    assert live_delay_ns(sc) == 100_000


def test_oversubscription_sets_the_fabric_rate():
    sc = parse_scenario({"topology": {"kind": "leaf-spine", "hosts": 8, "leaves": 2, "spines": 2,
                                      "oversubscription": 2.0}})
    assert sc.fabric_rate_gbps == 4 * 100 / (2 * 2.0)


BAD = [
    ({"topology": {"color": "red"}}, "topology.color", "unknown key"),
    ({"bogus": 1}, "bogus", "unknown key"),
    ({"links": {"rate_gbps": "fast"}}, "links.rate_gbps", "expected a number"),
    ({"links": {"mtu_bytes": 4200.5}}, "links.mtu_bytes", "expected an integer"),
    ({"emulation": {"dilation": True}}, "emulation.dilation", "expected a number"),
    ({"links": {"rate_gbps": -100}}, "links.rate_gbps", "must be positive"),
    ({"topology": {"hosts": ["h0", "h1", "h0"]}}, "topology.hosts", "duplicate host name 'h0'"),
    ({"links": {"mtu_bytes": 70000}}, "links.mtu_bytes", "veth maximum"),
    ({"links": {"mtu_bytes": 4200}, "emulation": {"xdp_mode": "native"}}, "links.mtu_bytes", "3506"),
    ({"topology": {"kind": "torus"}}, "topology.kind", "unknown topology kind"),
    ({"topology": {"kind": "tor", "spines": 2}}, "topology.spines", "only for"),
    ({"topology": {"hosts": ["h0", "s0"]}}, "topology.hosts", "switch name"),
    ({"links": {"rate_gbps": 0.01}}, "links.rate_gbps", "live rate"),
    ({"links": {"delay_ns": -1}}, "links.delay_ns", "negative"),
    ({"topology": 4}, "topology", "must be a table"),
    ({"dcqcn": {"rpg_threshold": 0}}, "dcqcn.rpg_threshold", "must be 1..31"),
    ({"dcqcn": {"rpg_speed": 1}}, "dcqcn.rpg_speed", "unknown key"),
    ({"ecn": {"kmin_bytes": 10, "kmax_bytes": 5}}, "ecn.kmin_bytes", "must be within"),
    ({"traffic": {"flows": [["h0", "h0"]]}}, "traffic.flows", "two different hosts"),
    ({"traffic": {"duration_s": -1}}, "traffic.duration_s", "must be in"),
    ({"dcqcn": {"roce_mtu": 4096}, "links": {"mtu_bytes": 3000}}, "dcqcn.roce_mtu", "does not fit"),
    ({"emulation": {"pacer": "fast"}}, "emulation.pacer", "must be one of"),
]


@pytest.mark.parametrize("data,key,reason", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_bad_scenarios_name_the_key_and_the_reason(data, key, reason):
    assert_names_key(lambda: parse_scenario(data), key, reason)


def _toml(data: dict) -> str:
    lines = [f"{k} = {v!r}" for k, v in data.items() if not isinstance(v, dict)]
    for table, values in data.items():
        if isinstance(values, dict):
            lines.append(f"[{table}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


@pytest.mark.parametrize("data,key,reason", BAD[:10], ids=[b[1] for b in BAD[:10]])
def test_testbed_up_rejects_bad_input_with_exit_2_one_line_and_makes_nothing(tmp_path, data, key, reason):
    path = tmp_path / "bad.toml"
    path.write_text(_toml(data))
    state = tmp_path / "state"
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    proc = subprocess.run([sys.executable, "-m", "cli.main", "testbed", "--state-dir", str(state),
                           "up", str(path)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and key + ":" in lines[0] and reason in lines[0]
    assert not state.exists()
    assert subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout == before


@pytest.mark.root
@pytest.mark.parametrize("key,value,qdisc", [("pacer", "kernel", "fq"), ("delay_method", "netem", "netem")])
def test_asking_for_a_qdisc_the_kernel_lacks_exits_2_and_makes_nothing(tmp_path, key, value, qdisc):
    from testbed.features import qdisc_problem

    if not qdisc_problem(qdisc):
        pytest.skip(f"sch_{qdisc} exists here")
    test_testbed_up_rejects_bad_input_with_exit_2_one_line_and_makes_nothing(
        tmp_path, {"emulation": {key: value}}, f"emulation.{key}", f"needs sch_{qdisc}")


@pytest.mark.parametrize("delay_method", ["netem", "endpoint"])
def test_the_kernel_pacer_puts_fq_on_host_nics_and_keeps_every_path_delay(delay_method):
    from testbed.builder import leaf_qdisc

    sc = parse_scenario({"topology": {"kind": "leaf-spine", "hosts": 4, "leaves": 2, "spines": 2}})
    plan = plan_topology(sc, "p0001")

    def path_delay_us(pacer, src, dst):
        """Host NIC, then one of each ECMP choice of switch ports."""
        switch_ports = plan.path_ports(src, dst)
        crossed = [plan.ports(src)[0]] + (switch_ports if len(switch_ports) == 1 else
                                          [switch_ports[0], switch_ports[-2], switch_ports[-1]])
        total = 0
        for port in crossed:
            leaf = leaf_qdisc(sc, delay_method, pacer, port)
            total += int(leaf.split("delay ")[1].split("us")[0]) if "netem" in leaf else 0
        return total

    for port in (p for node in plan.nodes for p in plan.ports(node)):
        kernel, cooperative = (leaf_qdisc(sc, delay_method, pacer, port) for pacer in ("kernel", "cooperative"))
        assert kernel.startswith("fq ") == (port.node in sc.hosts)
        assert not cooperative.startswith("fq")
    for src, dst in (("h0", "h1"), ("h0", "h3"), ("h3", "h0")):
        assert path_delay_us("kernel", src, dst) == path_delay_us("cooperative", src, dst)
        if delay_method == "netem":
            assert path_delay_us("kernel", src, dst) > 0


def test_the_feedback_delay_is_the_round_trip_less_the_senders_link():
    tor = plan_topology(parse_scenario({}), "p0001")
    d = live_delay_ns(tor.scenario)
    assert d == 100_000 and tor.feedback_delay_ns("h0", "h3") == 3 * d     # 4 links round trip
    ls = plan_topology(parse_scenario({"topology": {"kind": "leaf-spine", "hosts": 4, "leaves": 2,
                                                    "spines": 2}}), "p0002")
    same_leaf = [h for h in ls.scenario.hosts if ls.host_switch[h] == ls.host_switch["h0"]][1]
    other_leaf = next(h for h in ls.scenario.hosts if ls.host_switch[h] != ls.host_switch["h0"])
    assert ls.feedback_delay_ns("h0", same_leaf) == 3 * d
    assert ls.feedback_delay_ns("h0", other_leaf) == 7 * d                 # 8 links round trip
    assert (tor.one_way_delay_ns("h0", "h3"), ls.one_way_delay_ns("h0", other_leaf)) == (2 * d, 4 * d)


def _reachable(plan, src: str, dst_addr: str) -> bool:
    """Walk the planned routes hop by hop (longest prefix match; every ECMP
    next hop must lead there) from host `src` to an address."""
    by_addr = {p.addr: p for link in plan.links for p in (link.a, link.b)}
    peer = {p.ifname: o for link in plan.links for p, o in ((link.a, link.b), (link.b, link.a))}
    node, target = src, ipaddress.ip_address(dst_addr)
    for _hop in range(8):
        if by_addr.get(dst_addr) and by_addr[dst_addr].node == node:
            return True
        for port in plan.ports(node):   # connected /31s
            if target in ipaddress.ip_network(f"{port.addr}/31", strict=False):
                node = peer[port.ifname].node
                break
        else:
            routes = [r for r in plan.routes if r.node == node and
                      target in ipaddress.ip_network("0.0.0.0/0" if r.dst == "default" else r.dst)]
            if not routes:
                return False
            best = max(routes, key=lambda r: 0 if r.dst == "default" else ipaddress.ip_network(r.dst).prefixlen)
            nexts = {by_addr[gw].node for gw, _ in best.nexthops}
            if len(nexts) > 1:
                return all(_reachable(plan, n, dst_addr) for n in nexts)
            node = nexts.pop()
    return False


@pytest.mark.parametrize("topology", [
    {"kind": "tor", "hosts": 6},
    {"kind": "leaf-spine", "hosts": 4, "leaves": 2, "spines": 2},
    {"kind": "leaf-spine", "hosts": 9, "leaves": 3, "spines": 4},
])
def test_plan_gives_unique_addresses_short_names_and_full_reachability(topology):
    plan = plan_topology(parse_scenario({"topology": topology}), "p0abc")
    ports = [p for link in plan.links for p in (link.a, link.b)]
    assert len({p.addr for p in ports}) == len(ports)
    assert len({p.mac for p in ports}) == len(ports)
    assert len({p.ifindex for p in ports}) == len(ports) and min(p.ifindex for p in ports) > 1
    assert all(len(p.ifname) <= IFNAME_MAX and p.ifname.startswith("p0abc") for p in ports)
    assert all(ipaddress.ip_address(p.addr) in ipaddress.ip_network("198.18.0.0/15") for p in ports)
    for src in plan.hosts:
        for dst in plan.hosts:
            if src != dst:
                assert _reachable(plan, src, plan.host_addr(dst)), (src, dst)
    ecmp = [r for r in plan.routes if len(r.nexthops) > 1]
    assert all(len(r.nexthops) == plan.scenario.spines for r in ecmp)
    if plan.scenario.spines > 1:
        assert len(ecmp) == plan.scenario.leaves * (plan.scenario.leaves - 1)


def test_path_ports_cover_every_ecmp_choice_and_the_last_hop():
    plan = plan_topology(parse_scenario({"topology": {"kind": "leaf-spine", "hosts": 4}}), "p0abc")
    same = plan.path_ports("h0", "h1")
    assert [(p.node, p.faces) for p in same] == [("s0", "host")] and plan.peer(same[0]).node == "h1"
    cross = plan.path_ports("h0", "h2")
    assert sorted(p.node for p in cross) == ["s0", "s0", "s1", "s2", "s3"]
    assert {plan.peer(p).node for p in cross} == {"s2", "s3", "s1", "h2"}


def test_every_topology_kind_a_scenario_accepts_has_a_plan():
    from scenario.spec import LIVE_TOPOLOGY_KINDS, TOPOLOGY_KINDS
    from testbed.topology import TOPOLOGIES

    assert set(TOPOLOGIES) == set(TOPOLOGY_KINDS)
    for kind in TOPOLOGY_KINDS:             # the simulator's kinds plan too (paths: test_sim.py)
        plan = plan_topology(parse_scenario({"topology": {"kind": kind, "hosts": 4}}, live=False), "p0003")
        assert plan.kind is TOPOLOGIES[kind]
    for kind in LIVE_TOPOLOGY_KINDS:
        plan = plan_topology(parse_scenario({"topology": {"kind": kind, "hosts": 4}}), "p0003")
        d = live_delay_ns(plan.scenario)
        for src in plan.hosts:
            for dst in plan.hosts:
                if src != dst:
                    path = plan.path_ports(src, dst)
                    assert plan.peer(path[-1]).node == dst              # the path ends at dst
                    # one switch: 2 links each way; across a spine: 4
                    assert plan.feedback_delay_ns(src, dst) == (3 * d if len(path) == 1 else 7 * d)


def test_the_default_tor_headroom_is_two_bdps_of_its_longest_path_and_two_frames():
    sc = load_scenario(REPO / "examples/default.toml")
    plan = plan_topology(sc, "p0001")
    # 100 Gbit/s x 1 us = 12,500 bytes a link; host -> ToR -> host is 2 links
    assert plan.pfc_headroom_bytes() == 2 * 2 * 12_500 + 2 * (4200 + 14)
