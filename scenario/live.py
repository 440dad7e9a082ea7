"""The live-run tables of a scenario: [dcqcn] (reaction point parameters by
firmware name, datacenter units), [ecn] (switch marking) and [traffic]
(which flows, for how long). Validated with the rest of the scenario: one
line naming the key."""
from __future__ import annotations

from dataclasses import dataclass, fields

from scenario.dcqcn import DcqcnConfig, ParamError
from scenario.ecn import RedConfig
from scenario.errors import ScenarioError, fail as _fail

LIVE_TABLES = ("dcqcn", "ecn", "pfc", "traffic")

# The DCQCN paper's parameters in datacenter units at 100 Gbit/s, with the
# byte counter off (the design notes record a probe where 32,767 bytes left
# two flows badly unequal; not re-measured here): the defaults of a live
# run unless [dcqcn] says otherwise.
PAPER_DCQCN = dict(rpg_byte_reset=0, rpg_threshold=5, rpg_time_reset_us=55, dce_tcp_rtt_us=55,
                   dce_tcp_g=1020, rpg_ai_rate_mbps=100, rpg_hai_rate_mbps=1000)
_LIVE_KEYS = {"min_time_between_cnps_us", "pacing_slack_us", "roce_mtu", "retransmit_timeout_us"}
_DCQCN_KEYS = {f.name for f in fields(DcqcnConfig)} - {"line_rate_gbps"}


@dataclass(frozen=True)
class TrafficSpec:
    flows: tuple[tuple[str, str], ...]     # (source host, destination host), one QP each
    duration_s: float                      # live seconds of sending
    settle_s: float                        # left out of steady-state summaries
    sample_every_s: float


@dataclass(frozen=True)
class LiveCC:
    """What the live loop needs beyond the scenario: DCQCN parameters in
    datacenter units (timers scaled by the scenario's dilation), the CNP
    interval, RED thresholds in bytes, and the pacing slack."""

    dcqcn: DcqcnConfig = DcqcnConfig()
    min_time_between_cnps_us: float = 50.0
    red: RedConfig = RedConfig(lossless=True)     # DCQCN fabrics are lossless (docs/rnic.md)
    # Live, not dilated: it absorbs send-call delays. Measured with two
    # flows at 1 Gbit/s: 20 us left QPs 6% under their BPF rate, 60 us 0.2%.
    pacing_slack_us: float = 60.0
    roce_mtu: int = 4096
    # How long an RC requester that has sent everything waits for an ACK
    # before it resends from the first unacknowledged PSN (datacenter
    # units, scaled by dilation); 0: derived from the path (the emulator's
    # retransmit_timeout_ns).
    retransmit_timeout_us: float = 0.0


ROCE_HEADROOM = 80          # IP + UDP + BTH + RETH + ICRC around a RoCE MTU of payload


def _number(table: str, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(f"{table}.{key}", f"expected a number, got {type(value).__name__} {value!r}")
    return value


ROCE_MTUS = (4096, 2048, 1024, 512, 256)


def parse_live(data: dict, hosts: tuple[str, ...], rate_gbps: float,
               link_mtu: int) -> tuple[LiveCC, TrafficSpec]:
    for table in LIVE_TABLES:
        if table in data and not isinstance(data[table], dict):
            _fail(table, f"must be a table ([{table}])")
    dcqcn = dict(PAPER_DCQCN)
    live_extra = {}
    for key, value in data.get("dcqcn", {}).items():
        if key in _LIVE_KEYS:
            live_extra[key] = _number("dcqcn", key, value)
        elif key in _DCQCN_KEYS:
            dcqcn[key] = _number("dcqcn", key, value)
        else:
            _fail(f"dcqcn.{key}", f"unknown key (known: {', '.join(sorted(_DCQCN_KEYS | _LIVE_KEYS))})")
    config = DcqcnConfig(line_rate_gbps=rate_gbps, **dcqcn)
    try:
        config.validate()
    except ParamError as exc:
        raise ScenarioError(f"dcqcn.{exc}") from None

    ecn = data.get("ecn", {})
    for key in ecn:
        if key not in ("kmin_bytes", "kmax_bytes", "pmax"):
            _fail(f"ecn.{key}", "unknown key (known: kmin_bytes, kmax_bytes, pmax)")
    pfc = data.get("pfc", {})
    for key in pfc:
        if key not in ("enabled", "xoff_bytes", "xon_bytes"):
            _fail(f"pfc.{key}", "unknown key (known: enabled, xoff_bytes, xon_bytes)")
    if not isinstance(pfc.get("enabled", True), bool):
        _fail("pfc.enabled", f"expected true or false, got {pfc['enabled']!r}")
    xoff = int(_number("pfc", "xoff_bytes", pfc.get("xoff_bytes", 0)))
    xon = int(_number("pfc", "xon_bytes", pfc.get("xon_bytes", 0)))
    if xoff < 0 or xon < 0 or (xoff and xon > xoff):
        _fail("pfc.xon_bytes", f"need 0 <= xon_bytes <= xoff_bytes, got {xon}, {xoff}")
    red = RedConfig(**{k: _number("ecn", k, v) for k, v in ecn.items()},
                    lossless=pfc.get("enabled", True), xoff_bytes=xoff, xon_bytes=xon)
    if not 0 <= red.kmin_bytes <= red.kmax_bytes:
        _fail("ecn.kmin_bytes", f"must be within 0..kmax_bytes ({red.kmax_bytes}), got {red.kmin_bytes}")
    if not 0 <= red.pmax <= 1:
        _fail("ecn.pmax", f"must be within 0..1, got {red.pmax}")

    # RoCE MTU: the largest standard one the links carry, unless set.
    fitting = [m for m in ROCE_MTUS if m + ROCE_HEADROOM <= link_mtu]
    live_extra.setdefault("roce_mtu", fitting[0] if fitting else ROCE_MTUS[-1])
    live = LiveCC(dcqcn=config, red=red, **live_extra)
    if live.min_time_between_cnps_us < 0 or live.pacing_slack_us < 0 or live.retransmit_timeout_us < 0:
        _fail("dcqcn.min_time_between_cnps_us", "times must not be negative")
    if live.roce_mtu not in ROCE_MTUS:
        _fail("dcqcn.roce_mtu", f"must be 256, 512, 1024, 2048 or 4096, got {live.roce_mtu}")
    if live.roce_mtu + ROCE_HEADROOM > link_mtu:
        _fail("dcqcn.roce_mtu", f"{live.roce_mtu} plus headers does not fit links.mtu_bytes ({link_mtu})")
    return live, _traffic(data.get("traffic", {}), hosts)


def _traffic(table: dict, hosts: tuple[str, ...]) -> TrafficSpec:
    known = ("flows", "duration_s", "settle_s", "sample_every_s")
    for key in table:
        if key not in known:
            _fail(f"traffic.{key}", f"unknown key (known: {', '.join(known)})")
    default_flows = [[hosts[0], hosts[2]], [hosts[1], hosts[2]]] if len(hosts) >= 3 else [[hosts[0], hosts[1]]]
    flows = table.get("flows", default_flows)
    if not isinstance(flows, list) or not flows:
        _fail("traffic.flows", "must be a non-empty list of [source, destination] host pairs")
    pairs = []
    for flow in flows:
        if (not isinstance(flow, list) or len(flow) != 2 or flow[0] not in hosts or flow[1] not in hosts
                or flow[0] == flow[1]):
            _fail("traffic.flows", f"{flow!r} is not a [source, destination] pair of two different hosts")
        pairs.append((flow[0], flow[1]))
    spec = TrafficSpec(tuple(pairs),
                       float(_number("traffic", "duration_s", table.get("duration_s", 8.0))),
                       float(_number("traffic", "settle_s", table.get("settle_s", 2.0))),
                       float(_number("traffic", "sample_every_s", table.get("sample_every_s", 0.01))))
    if not 0 < spec.duration_s <= 3600:
        _fail("traffic.duration_s", f"must be in (0, 3600], got {spec.duration_s}")
    if not 0 <= spec.settle_s < spec.duration_s:
        _fail("traffic.settle_s", f"must be in [0, duration_s), got {spec.settle_s}")
    if not 0.001 <= spec.sample_every_s <= spec.duration_s:
        _fail("traffic.sample_every_s", f"must be in [0.001, duration_s], got {spec.sample_every_s}")
    return spec
