"""The switch ports' BPF object (bpf/switch_port.c): ctypes mirrors, RED
configuration in bytes, and telemetry reads. One object per testbed; ports
are keyed by their testbed-unique ifindex."""
from __future__ import annotations

import ctypes

from scenario.ecn import RedConfig

MAX_IFINDEX = 8192
PORT_F_ENABLED = 1
PORT_F_LOSSLESS = 2
PORT_F_FACES_HOST = 4


class PortCfg(ctypes.Structure):
    _fields_ = [("ps_per_byte", ctypes.c_uint64), ("kmin_bytes", ctypes.c_uint64),
                ("kmax_bytes", ctypes.c_uint64), ("limit_bytes", ctypes.c_uint64),
                ("xoff_bytes", ctypes.c_uint64), ("xon_bytes", ctypes.c_uint64),
                ("pmax", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("vtime_shift", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32)]


class PortStats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "packets", "bytes", "ect_packets", "marked", "q_bytes", "q_max", "last_ns",
        "pause_until_ns", "pause_events", "drops", "paused_ns")]


PORT_STATS_WORDS, PAUSE_UNTIL_WORD = ctypes.sizeof(PortStats) // 8, PortStats.pause_until_ns.offset // 8
VTIME_HALF_RANGE = 1 << 15                    # wire-time units a stamp may be off (vtime.h)
# Room for the CPU's own delays on top. 4 us units at the defaults: finer
# would gain nothing (a 4 KB packet takes 33 us at 1 Gb/s) and leave less
# room for a busy machine.
VTIME_JITTER_NS = 100_000_000


def vtime_shift_for(longest_age_ns: int) -> int:
    """The wire-time unit, 2^shift us, for packets up to longest_age_ns (the
    longest queueing plus link delay a hop can add) older than their stamp,
    with room for the emulator's own delays; the finest unit that covers it."""
    shift = 0
    while (VTIME_HALF_RANGE << shift) * 1000 <= longest_age_ns + VTIME_JITTER_NS:
        shift += 1
    if shift > 15:
        raise ValueError(f"a hop may delay a packet {longest_age_ns / 1e9:.1f} s: too long for a wire time")
    return shift


class SwitchPorts:
    def __init__(self):
        from bcc import BPF

        from dataplane.bpf_build import compile_bpf

        self.bpf = compile_bpf("switch_port")
        self.fn = self.bpf.load_func("switch_port", BPF.SCHED_CLS)

    def configure_port(self, ifindex: int, rate_bps: float, red: RedConfig, limit_bytes: int,
                       faces_host: bool, vtime_shift: int = 0, headroom_bytes: int = 0) -> None:
        """faces_host: the port is a last hop; it clears the packets'
        virtual wire time (bpf/include/vtime.h) instead of restamping it,
        whose unit is 2^vtime_shift us; headroom_bytes: lossless mode's
        room above Xoff (RedConfig.xoff)."""
        red.validate()
        if not 0 < ifindex < MAX_IFINDEX:
            raise ValueError(f"ifindex must be 1..{MAX_IFINDEX - 1}, got {ifindex}")
        table = self.bpf["port_cfg"]
        cfg = PortCfg(ps_per_byte=round(8e12 / rate_bps), kmin_bytes=red.kmin_bytes,
                      kmax_bytes=red.kmax_bytes, limit_bytes=limit_bytes, xoff_bytes=red.xoff(limit_bytes, headroom_bytes),
                      xon_bytes=red.xon(limit_bytes, headroom_bytes), pmax=min(round(red.pmax * 2**32), 2**32 - 1),
                      flags=PORT_F_ENABLED | (PORT_F_LOSSLESS if red.lossless else 0)
                      | (PORT_F_FACES_HOST if faces_host else 0), vtime_shift=vtime_shift)
        table[table.Key(ifindex)] = table.Leaf.from_buffer_copy(bytes(cfg))
        for name in ("port_queue", "port_stats"):
            t = self.bpf[name]
            t[t.Key(ifindex)] = t.Leaf()

    def stats(self, ifindex: int) -> PortStats:
        table = self.bpf["port_stats"]
        return PortStats.from_buffer_copy(bytes(table[table.Key(ifindex)]))

    def close(self) -> None:
        self.bpf.cleanup()
