"""Write pcap files: nanosecond timestamps, Ethernet link type, frames as
they are (no re-dissection, no scapy)."""
from __future__ import annotations

import struct
import time
from pathlib import Path

PCAP_NS_MAGIC = 0xA1B23C4D          # pcap with nanosecond timestamps
LINKTYPE_ETHERNET = 1
SNAPLEN = 65535


def write_pcap(path: str | Path, frames: list[bytes], times_ns: list[int] | None = None) -> None:
    """times_ns: each frame's capture time (CLOCK_REALTIME ns); without
    them every frame gets the time of writing."""
    now = time.time_ns()
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", PCAP_NS_MAGIC, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))
        for i, frame in enumerate(frames):
            t = times_ns[i] if times_ns is not None else now
            f.write(struct.pack("<IIII", t // 10**9, t % 10**9, len(frame), len(frame)))
            f.write(frame)
