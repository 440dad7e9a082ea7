"""DCQCN reaction-point parameters as a scenario states them: NVIDIA
firmware names and defaults (docs/dcqcn.md), physical units, plus PRC's
weight bounds. Pure data; dataplane.cc turns them into the core's
fixed-point struct."""
from __future__ import annotations

from dataclasses import dataclass, fields


class ParamError(ValueError):
    """A CC parameter out of its range; str() names it."""


@dataclass(frozen=True)
class DcqcnConfig:
    line_rate_gbps: float = 100.0
    rpg_time_reset_us: float = 300.0
    rpg_byte_reset: int = 32767
    rpg_threshold: int = 1
    rpg_ai_rate_mbps: float = 5.0
    rpg_hai_rate_mbps: float = 50.0
    rpg_gd: int = 11
    rpg_min_dec_fac: int = 50
    rpg_min_rate_mbps: float = 1.0
    dce_tcp_g: int = 1019
    dce_tcp_rtt_us: float = 1.0
    rate_reduce_monitor_period_us: float = 4.0
    initial_alpha_value: int = 1023
    w_min: float = 0.25
    w_max: float = 4.0

    def validate(self) -> None:
        checks = [
            ("line_rate_gbps", self.line_rate_gbps > 0, "must be positive"),
            ("rpg_time_reset_us", 0 < self.rpg_time_reset_us <= 4e6, "must be in (0, 4 s]"),
            ("rpg_byte_reset", self.rpg_byte_reset == 0 or 1024 <= self.rpg_byte_reset < 2**31,
             "must be 0 (off) or 1024..2^31"),
            ("rpg_threshold", 1 <= self.rpg_threshold <= 31, "must be 1..31"),
            ("rpg_ai_rate_mbps", 0 <= self.rpg_ai_rate_mbps <= self.line_rate_gbps * 1e3,
             "must be within 0..line rate"),
            ("rpg_hai_rate_mbps", 0 <= self.rpg_hai_rate_mbps <= self.line_rate_gbps * 1e3,
             "must be within 0..line rate"),
            ("rpg_gd", 10 <= self.rpg_gd <= 20, "must be 10..20"),
            ("rpg_min_dec_fac", 0 <= self.rpg_min_dec_fac <= 100, "must be 0..100 (percent)"),
            ("rpg_min_rate_mbps", 0 <= self.rpg_min_rate_mbps <= self.line_rate_gbps * 1e3,
             "must be within 0..line rate"),
            ("dce_tcp_g", 0 <= self.dce_tcp_g <= 1024, "must be 0..1024"),
            ("dce_tcp_rtt_us", 0 < self.dce_tcp_rtt_us <= 4e6, "must be in (0, 4 s]"),
            ("rate_reduce_monitor_period_us", 0 <= self.rate_reduce_monitor_period_us <= 4e6,
             "must be in [0, 4 s]"),
            ("initial_alpha_value", 0 <= self.initial_alpha_value <= 1024, "must be 0..1024"),
            ("w_min", 1 / 1024 <= self.w_min <= 1, "must be in [1/1024, 1]"),
            ("w_max", 1 <= self.w_max <= 64, "must be in [1, 64]"),
        ]
        for name, ok, reason in checks:
            if not ok:
                raise ParamError(f"{name}: {reason}, got {getattr(self, name)}")

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]
