"""One flow's counters at one instant, read from the mmapped qp_tx and
qp_rx maps, with the Q20 rate and alpha decoded once, here. Live runs
sample these; `prc-emu top` shows them."""
from __future__ import annotations

from dataclasses import dataclass

from dataplane.cc import q20_fraction


@dataclass(frozen=True)
class FlowCounters:
    sent_bytes: int             # by the sender's nic_tx
    delivered_bytes: int        # taken in PSN order by the receiver's nic_rx
    rate: float                 # the sender's BPF rate, fraction of line rate
    alpha: float
    cnps: int                   # received by the sender
    ce_marks: int               # seen by the receiver


def read_flow(tx, rx, send_qpn: int, recv_qpn: int) -> FlowCounters:
    """tx, rx: the qp_tx and qp_rx maps (MmapArray views)."""
    sent, got = tx[send_qpn], rx[recv_qpn]
    return FlowCounters(sent.bytes, got.delivered_bytes, q20_fraction(sent.rate), q20_fraction(sent.alpha),
                        sent.cnps_received, got.ce_packets)


@dataclass(frozen=True)
class Sample:
    t_ns: int
    flows: list[FlowCounters]   # in the order of the run's flows
