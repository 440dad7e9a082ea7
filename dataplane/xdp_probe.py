"""Real packets through a real XDP program on a veth pair.

count_on_veth() must run inside a network namespace of its own (see
testbed.isolated): it creates a veth pair there, attaches bpf/roce_count
to one end and sends frames into the other through an AF_PACKET socket.
"""
from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from dataplane import roce
from dataplane.bpf_build import XDP_FLAGS, compile_bpf
from dataplane.shared import read_qp_counters


TX_LINK, RX_LINK = "prcx0tx", "prcx0rx"


@dataclass(frozen=True)
class VethCount:
    mode: str
    sent: int
    counters: dict[int, tuple[int, int]]   # qp -> (packets, bytes) seen by XDP


def make_veth_pair(mtu: int = 1500) -> None:
    """A veth pair in the current namespace, both ends up."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        ipr.link("add", ifname=TX_LINK, kind="veth", peer={"ifname": RX_LINK})
        for name in (TX_LINK, RX_LINK):
            idx = ipr.link_lookup(ifname=name)[0]
            ipr.link("set", index=idx, mtu=mtu, state="up")


def count_on_veth(frames: list[bytes], mode: str = "native", mtu: int = 1500,
                  settle_s: float = 2.0) -> VethCount:
    """Send `frames` across a fresh veth pair with roce_count attached to the
    receiving end in the given XDP mode; return what the program counted."""
    from bcc import BPF

    make_veth_pair(mtu)
    bpf = compile_bpf("roce_count")
    fn = bpf.load_func("roce_count", BPF.XDP)
    BPF.attach_xdp(RX_LINK, fn, XDP_FLAGS[mode])
    try:
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((TX_LINK, 0))
            for frame in frames:
                sock.send(frame)
        # Delivery to the peer is asynchronous (NAPI): wait until every frame
        # that should count has, or give up after settle_s.
        expected = sum(roce.parse(f) is not None for f in frames)
        table = bpf["qp_counters"]
        deadline = time.monotonic() + settle_s
        while True:
            counters = read_qp_counters(table)
            if sum(p for p, _ in counters.values()) >= expected or time.monotonic() > deadline:
                return VethCount(mode, len(frames), counters)
            time.sleep(0.01)
    finally:
        BPF.remove_xdp(RX_LINK, XDP_FLAGS[mode])
