"""[control]: which rate-control policy runs over DCQCN and its knobs.
Times are datacenter microseconds (x dilation live), lag is a fraction
of a process's baseline iteration."""
from __future__ import annotations

from dataclasses import dataclass

from scenario.errors import check_table, fail, integer, number

POLICIES = ("dcqcn", "prc", "oracle", "mltcp")


@dataclass(frozen=True)
class ControlSpec:
    policy: str = "dcqcn"          # dcqcn: no process input, every weight 1
    tick_us: float = 10.0          # how often lag is re-evaluated between progress events
    late_threshold: float = 0.05   # lag (fraction of the baseline iteration) that makes a process late
    noise_mads: float = 0.0        # ... or this many median absolute deviations of its iteration times, if more
    gain: float = 40.0             # weight = 1 + gain x lag, up to w_max
    w_max: float = 16.0            # the NIC port's arbiter uses it as is; DCQCN's steps clamp it to [dcqcn] w_max
    w_yield: float = 1.0           # weight of a process on time sharing a NIC with a late one (< 1: yields)
    floor: float = 0.0             # rate floor of a late process, fraction of line (0: none)
    window: int = 5                # baselines: medians over a process's last this many iterations
    observe: str = "training"      # whose progress the policy sees: training jobs' ranks, or "all" processes
    carry_over: bool = True        # an iteration that ended late leaves its process late through the next
    trigger: str = "straggler"     # prc helps a job through a straggler episode by its largest lag, or any late process ("lag")


OBSERVED = ("training", "all")
TRIGGERS = ("lag", "straggler")
_RANGES = {"tick_us": (0.1, 1e6), "late_threshold": (0.0, 10.0), "noise_mads": (0.0, 100.0), "gain": (0.0, 1e3),
           "w_max": (1.0, 64.0), "w_yield": (1 / 1024, 1.0), "floor": (0.0, 1.0)}


def parse_control(table) -> ControlSpec:
    check_table("control", table, tuple(ControlSpec.__dataclass_fields__), "a table ([control])")
    default = ControlSpec()
    values = {k: number(f"control.{k}", table.get(k, getattr(default, k)), low, high)
              for k, (low, high) in _RANGES.items()}
    values["window"] = integer("control.window", table.get("window", default.window), 1, 100)
    values["carry_over"] = table.get("carry_over", default.carry_over)
    if not isinstance(values["carry_over"], bool):
        fail("control.carry_over", f"must be true or false, got {values['carry_over']!r}")
    for key, choices in (("policy", POLICIES), ("observe", OBSERVED), ("trigger", TRIGGERS)):
        values[key] = table.get(key, getattr(default, key))
        if values[key] not in choices:
            fail(f"control.{key}", f"must be one of {', '.join(choices)}, got {values[key]!r}")
    return ControlSpec(**values)
