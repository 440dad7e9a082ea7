"""Steps that configure one testbed node. Each runs inside that node's
namespace (a child that entered it with testbed.isolated.enter_netns, which
verifies the switch), so nothing here can reach another namespace except
the veth peer it names explicitly."""
from __future__ import annotations

import subprocess
from pathlib import Path

from testbed.topology import Plan

NUD_PERMANENT = 0x80


def write_sysctls(values: dict[str, str]) -> None:
    """Network sysctls of the current namespace (each namespace has its own
    copy, starting at the kernel defaults)."""
    for key, value in values.items():
        Path("/proc/sys", *key.split(".")).write_text(value)


def node_sysctls(plan: Plan, node: str) -> dict[str, str]:
    values = {
        # No IPv6: autoconfiguration would send packets on new veths.
        "net.ipv6.conf.all.disable_ipv6": "1",
        "net.ipv6.conf.default.disable_ipv6": "1",
    }
    if node in plan.switches:
        values["net.ipv4.ip_forward"] = "1"
        values["net.ipv4.fib_multipath_hash_policy"] = "1"   # ECMP by L4 ports: per-QP entropy
    return values


def create_veths(plan: Plan, node: str) -> None:
    """The veth pairs whose A end belongs to `node`, peers straight into the
    other node's namespace (never through the root namespace), both ends
    with the planned ifindex (iproute2: pyroute2 cannot set the peer's)."""
    mtu = plan.scenario.mtu_bytes
    lines = []
    for link in plan.links:
        if link.a.node != node:
            continue
        a, b = link.a, link.b
        lines.append(f"link add {a.ifname} index {a.ifindex} address {a.mac} mtu {mtu} type veth "
                     f"peer name {b.ifname} index {b.ifindex} address {b.mac} mtu {mtu} "
                     f"netns {plan.netns(b.node)}")
    if lines:
        _batch(["ip", "-n", plan.netns(node)], lines)


def _batch(command: list[str], lines: list[str]) -> None:
    proc = subprocess.run(command + ["-batch", "-"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {proc.stderr.strip()}")


def configure_node(plan: Plan, node: str, xdp_fd: int | None, leaf_qdiscs: dict[int, str]) -> None:
    """Addresses, static neighbours, routes and egress qdiscs of one node,
    and the pass-through XDP program on ports facing hosts (native mode)."""
    from pyroute2 import IPRoute

    peers = {p.ifname: other for link in plan.links
             for p, other in ((link.a, link.b), (link.b, link.a))}
    ports = plan.ports(node)
    with IPRoute() as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        index = {}
        for port in ports:
            idx = index[port.ifname] = ipr.link_lookup(ifname=port.ifname)[0]
            ipr.addr("add", index=idx, address=port.addr, prefixlen=31)
            peer = peers[port.ifname]
            # Static neighbours: no ARP on the wire, and nothing for an XDP
            # program that consumes frames to break.
            ipr.neigh("add", dst=peer.addr, lladdr=peer.mac, ifindex=idx, state=NUD_PERMANENT)
            ipr.link("set", index=idx, state="up")
        for route in plan.routes:
            if route.node != node:
                continue
            dst = "0.0.0.0/0" if route.dst == "default" else route.dst
            hops = [{"gateway": gw, "oif": index[ifname]} for gw, ifname in route.nexthops]
            if len(hops) == 1:
                ipr.route("add", dst=dst, gateway=hops[0]["gateway"], oif=hops[0]["oif"])
            else:
                ipr.route("add", dst=dst, multipath=hops)

    _add_qdiscs(plan, node, leaf_qdiscs)
    if xdp_fd is not None:
        from bcc import BPF

        from dataplane.bpf_build import XDP_FLAGS

        fn = BPF.Function(None, b"xdp_pass", xdp_fd)   # loaded by the parent; fd inherited
        for port in ports:
            if port.faces == "host":
                BPF.attach_xdp(port.ifname, fn, XDP_FLAGS["native"])


def egress_commands(plan: Plan, node: str, leaf_qdiscs: dict[int, str]) -> list[str]:
    """tc batch lines: HTB at the port's live rate, with the port's leaf
    qdisc (by ifindex) holding its buffer, emulating delay or pacing."""
    mtu_frame = plan.scenario.mtu_bytes + 14
    lines = []
    for port in plan.ports(node):
        # Burst: two frames. Larger bursts let short-term rates exceed the
        # link rate, which the marking queue model must not see.
        burst = 2 * mtu_frame
        lines += [
            f"qdisc add dev {port.ifname} root handle 1: htb default 1",
            f"class add dev {port.ifname} parent 1: classid 1:1 htb rate {port.rate_bps}bit "
            f"ceil {port.rate_bps}bit burst {burst}b cburst {burst}b quantum {mtu_frame}",
            f"qdisc add dev {port.ifname} parent 1:1 handle 10: {leaf_qdiscs[port.ifindex]}",
        ]
    return lines


def _add_qdiscs(plan: Plan, node: str, leaf_qdiscs: dict[int, str]) -> None:
    _batch(["tc", "-n", plan.netns(node)], egress_commands(plan, node, leaf_qdiscs))


def steer_receive(ifnames: list[str], cpus: set[int]) -> None:
    """Receive processing (RPS) of these interfaces on the given CPUs. Runs
    inside the node's namespace; needs that namespace's own sysfs."""
    from testbed.isolated import mount_own_sysfs

    mount_own_sysfs()
    mask = format(sum(1 << c for c in cpus), "x")
    for ifname in ifnames:
        queues = Path("/sys/class/net", ifname, "queues")
        for queue in queues.glob("rx-*"):
            (queue / "rps_cpus").write_text(mask)
