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
    xoff_bytes: int = 0         # 0: a quarter of the port's buffer
    xon_bytes: int = 0          # 0: an eighth of the port's buffer

    def xoff(self, buffer_bytes: int) -> int:
        return self.xoff_bytes or buffer_bytes // 4

    def xon(self, buffer_bytes: int) -> int:
        return min(self.xon_bytes or buffer_bytes // 8, self.xoff(buffer_bytes))

    def validate(self) -> None:
        if not 0 <= self.kmin_bytes <= self.kmax_bytes:
            raise ValueError(f"RED: need 0 <= kmin_bytes <= kmax_bytes, got {self.kmin_bytes}, {self.kmax_bytes}")
        if not 0 <= self.pmax <= 1:
            raise ValueError(f"RED: pmax must be within 0..1, got {self.pmax}")
