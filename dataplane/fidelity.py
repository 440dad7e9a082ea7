"""How faithfully the TX engine followed the pacer: did congestion control
or the engine set the rates? Computed from the engine's per-packet log
(send time, wire bytes, BPF rate in force, lateness against departure, and
how long a lossless pause or credit held the packet: time the network, not
the engine, took, left out of both)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dataplane.cc import q20_fraction

WINDOW_PACKETS = 100
MAX_RATE_ERROR = 0.05           # achieved vs BPF rate, per window
# An engine that cannot keep up sends below the BPF rate for good; one that
# catches up after a late packet (within the pacing slack) sends above it
# for a window. A run is invalid when the engine held QPs under their rate.
MAX_UNDER_WINDOWS = 0.10        # share of windows more than 5% under the BPF rate
MIN_RATIO_P50 = 0.97
# The engine's per-packet log (struct tx_log_entry in bpf/engine/tx_burst.c)
PACKET_LOG = np.dtype([("sent_ns", "<u8"), ("wire_bytes", "<u4"), ("rate", "<u4"), ("late_ns", "<i8"),
                       ("held_ns", "<u8")])


@dataclass(frozen=True)
class QpFidelity:
    qpn: int
    packets: int
    lateness_p50_us: float
    lateness_p99_us: float
    windows: int
    rate_ratio_p50: float         # achieved / BPF rate over windows of 100 packets
    good_windows: float           # share of windows within MAX_RATE_ERROR
    under_windows: float          # share of windows more than MAX_RATE_ERROR under

    @property
    def valid(self) -> bool:
        return self.windows == 0 or (self.under_windows <= MAX_UNDER_WINDOWS
                                     and self.rate_ratio_p50 >= MIN_RATIO_P50)


def qp_fidelity(qpn: int, log, line_rate_bps: float, since_ns: int = 0) -> QpFidelity:
    """log: a PACKET_LOG array (or its rows as tuples) of send time ns,
    wire bytes, BPF rate Q20 after the packet and lateness ns per packet,
    in order; packets sent before since_ns (a start-up transient) are left
    out."""
    log = np.asarray(log, dtype=PACKET_LOG)
    log = log[log["sent_ns"] >= since_ns]
    if not len(log):
        return QpFidelity(qpn, 0, 0.0, 0.0, 0, 0.0, 0.0, 0.0)
    sent, nbytes = log["sent_ns"].astype(np.float64), log["wire_bytes"].astype(np.float64)
    rate, held = log["rate"].astype(np.float64), log["held_ns"].astype(np.float64)
    late = np.maximum(log["late_ns"].astype(np.float64) - held, 0)
    # the gap the pacer asked for after each packet, at the rate it set
    asked = nbytes * 8e9 / (q20_fraction(np.maximum(rate, 1)) * line_rate_bps)
    ratios = []
    for start in range(0, len(log) - WINDOW_PACKETS, WINDOW_PACKETS):
        stop = start + WINDOW_PACKETS
        actual = sent[stop] - sent[start] - held[start + 1:stop + 1].sum()
        if actual > 0:
            ratios.append(asked[start:stop].sum() / actual)
    ratios = np.asarray(ratios)
    good = float(np.mean(np.abs(ratios - 1) <= MAX_RATE_ERROR)) if len(ratios) else 0.0
    under = float(np.mean(ratios < 1 - MAX_RATE_ERROR)) if len(ratios) else 0.0
    return QpFidelity(qpn, len(log), float(np.percentile(late, 50)) / 1e3,
                      float(np.percentile(late, 99)) / 1e3, len(ratios),
                      float(np.median(ratios)) if len(ratios) else 0.0, good, under)
