"""Switch marking and pause thresholds as a scenario states them ([ecn] and
[pfc]): bytes, not scaled by dilation."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RedConfig:
    """ECN marking thresholds in bytes (not scaled by dilation) and Pmax."""

    kmin_bytes: int = 5_000
    kmax_bytes: int = 200_000
    pmax: float = 0.01
    lossless: bool = False      # PFC-like pause at xoff_bytes until drained to xon_bytes
    xoff_bytes: int = 0         # 0: the buffer less the headroom (at least half the buffer)
    xon_bytes: int = 0          # 0: Xoff less the headroom (at least half of Xoff)

    # As on a PFC switch, a port pauses only when what may still arrive
    # after the pause (the headroom) would just fit: ECN marks from Kmin
    # long before, and DCQCN keeps the queue under Xoff; pauses are the
    # backstop. The headroom comes from the topology (Plan.pfc_headroom_bytes).
    def xoff(self, buffer_bytes: int, headroom_bytes: int) -> int:
        return self.xoff_bytes or max(buffer_bytes - headroom_bytes, buffer_bytes // 2)

    def xon(self, buffer_bytes: int, headroom_bytes: int) -> int:
        xoff = self.xoff(buffer_bytes, headroom_bytes)
        return min(self.xon_bytes or max(xoff - headroom_bytes, xoff // 2), xoff)

    def validate(self) -> None:
        if not 0 <= self.kmin_bytes <= self.kmax_bytes:
            raise ValueError(f"RED: need 0 <= kmin_bytes <= kmax_bytes, got {self.kmin_bytes}, {self.kmax_bytes}")
        if not 0 <= self.pmax <= 1:
            raise ValueError(f"RED: pmax must be within 0..1, got {self.pmax}")
