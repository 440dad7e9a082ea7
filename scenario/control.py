"""[control]: which rate-control policy runs over DCQCN and its knobs.
Times are datacenter microseconds (x dilation live), lag is a fraction
of a process's baseline iteration."""
from __future__ import annotations

from dataclasses import dataclass

from scenario.errors import fail as _fail

POLICIES = ("dcqcn", "prc", "oracle", "mltcp")


@dataclass(frozen=True)
class ControlSpec:
    policy: str = "dcqcn"          # dcqcn: no process input, every weight 1
    tick_us: float = 10.0          # how often lag is re-evaluated between progress events
    late_threshold: float = 0.05   # lag (fraction of the baseline iteration) that makes a process late
    gain: float = 10.0             # weight = 1 + gain x lag, up to w_max
    w_max: float = 4.0             # beyond 4 gained little in probes; [dcqcn] w_min/w_max clamp it too
    w_yield: float = 1.0           # weight of a process on time sharing a NIC with a late one (< 1: yields)
    floor: float = 0.0             # rate floor of a late process, fraction of line (0: none)
    window: int = 5                # baselines: medians over a process's last this many iterations
    observe: str = "training"      # whose progress the policy sees: training jobs' ranks, or "all" processes


_KEYS = {f: type(getattr(ControlSpec, f)) for f in ControlSpec.__dataclass_fields__}


def parse_control(table) -> ControlSpec:
    if not isinstance(table, dict):
        _fail("control", "must be a table ([control])")
    values = {}
    for key, value in table.items():
        if key not in _KEYS:
            _fail(f"control.{key}", f"unknown key (known: {', '.join(_KEYS)})")
        kind = _KEYS[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            _fail(f"control.{key}", f"must be {kind.__name__}, got {value!r}")
        values[key] = value
    spec = ControlSpec(**values)
    if spec.policy not in POLICIES:
        _fail("control.policy", f"must be one of {', '.join(POLICIES)}, got {spec.policy!r}")
    for key, low, high in (("tick_us", 0.1, 1e6), ("late_threshold", 0.0, 10.0), ("gain", 0.0, 1e3),
                           ("w_max", 1.0, 64.0), ("w_yield", 1 / 1024, 1.0), ("floor", 0.0, 1.0)):
        if not low <= getattr(spec, key) <= high:
            _fail(f"control.{key}", f"must be in [{low:g}, {high:g}], got {getattr(spec, key)!r}")
    if spec.observe not in ("training", "all"):
        _fail("control.observe", f"must be training or all, got {spec.observe!r}")
    if not 1 <= spec.window <= 100:
        _fail("control.window", f"must be in [1, 100], got {spec.window}")
    return spec
