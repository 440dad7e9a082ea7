"""Decode frames with tshark: an independent RoCEv2 dissector to check ours."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from dataplane.pcap import write_pcap

FIELDS = ("infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
          "infiniband.invariant.crc")


def available() -> bool:
    return shutil.which("tshark") is not None


def decode_pcap(path: Path) -> list[dict[str, int | None]]:
    """One dict per frame with the BTH fields tshark found (None where it
    found none), numbers parsed from tshark's text."""
    proc = subprocess.run(
        ["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "separator=,"]
        + [arg for f in FIELDS for arg in ("-e", f)],
        capture_output=True, text=True, timeout=120, check=True)
    rows = []
    for line in proc.stdout.splitlines():
        values = line.split(",")
        rows.append({name.rsplit(".", 1)[1]: int(v, 0) if v else None
                     for name, v in zip(FIELDS, values)})
    return rows


def decode_frames(frames: list[bytes]) -> list[dict[str, int | None]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "frames.pcap"
        write_pcap(path, frames)
        return decode_pcap(path)
