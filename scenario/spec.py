"""Scenario files (TOML): the emulated cluster, in datacenter units.

Every problem is reported as one ScenarioError naming the key and the reason,
before anything is created. The schema is documented in docs/scenario.md.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from scenario.errors import ScenarioError, fail as _fail
from scenario.control import ControlSpec, parse_control
from scenario.job import JobSpec, check_live_jobs, parse_jobs
from scenario.live import LIVE_TABLES, LiveCC, TrafficSpec, parse_live

NATIVE_XDP_MAX_MTU = 3506   # veth refuses native XDP above this peer MTU (4 KiB pages)
VETH_MAX_MTU = 65535
MIN_MTU = 576
MIN_LIVE_RATE_BPS = 1e6      # HTB below ~1 Mbit/s is too coarse to mean anything
MAX_LIVE_RATE_BPS = 40e9     # far beyond what one machine's veths carry
MAX_HOSTS = 16384             # host links numbered from 198.18.0.0 stay below the fabric's 198.19.0.0/16
MAX_LIVE_HOSTS_PER_SWITCH = 127   # live routes: one /24 per rack
HOST_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")

TOPOLOGY_KINDS = ("tor", "leaf-spine", "fat-tree")
LIVE_TOPOLOGY_KINDS = ("tor", "leaf-spine")
XDP_MODES = ("generic", "native")
DELAY_METHODS = ("auto", "netem", "endpoint")
PACERS = ("auto", "kernel", "cooperative")


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str                   # "tor" or "leaf-spine"
    hosts: tuple[str, ...]
    leaves: int                 # racks: 1 for a ToR, a fat-tree's edge switches
    spines: int                 # the top tier: 0 for a ToR, a fat-tree's core switches
    oversubscription: float
    rate_gbps: float            # host links, datacenter units
    delay_ns: int               # one-way propagation per link, datacenter units
    mtu_bytes: int              # IP MTU of every link
    buffer_bytes: int           # per switch egress port
    dilation: float
    xdp_mode: str
    delay_method: str           # as asked: auto, netem or endpoint
    pacer: str = "auto"         # as asked: auto, kernel (sch_fq) or cooperative
    live: LiveCC = LiveCC()     # [dcqcn], [ecn] and [pfc]
    traffic: TrafficSpec | None = None   # [traffic]; parse_scenario always fills it
    jobs: tuple[JobSpec, ...] = ()      # [[job]]: a workload run instead of [traffic]'s flows
    control: ControlSpec = ControlSpec()  # [control]: the policy over DCQCN (job scenarios)
    pods: int = 0                         # a fat-tree's k: k pods of k/2 edge and k/2 aggregation switches

    @property
    def fabric_rate_gbps(self) -> float:
        """The rate of links between switches giving the asked
        oversubscription: the busiest rack's host bandwidth over its
        switch's total uplink bandwidth (every tier alike)."""
        if self.spines == 0:
            return self.rate_gbps
        per_leaf = math.ceil(len(self.hosts) / self.leaves)
        uplinks = self.pods // 2 if self.kind == "fat-tree" else self.spines
        return per_leaf * self.rate_gbps / (uplinks * self.oversubscription)



# table -> key -> (type, default); a default of None means required.
_SCHEMA: dict[str, dict[str, tuple[type | tuple[type, ...], object]]] = {
    "": {"name": (str, "scenario")},
    "topology": {
        "kind": (str, "tor"),
        "hosts": ((int, list), 4),
        "leaves": (int, 2),
        "spines": (int, 2),
        "oversubscription": ((int, float), 1.0),
        "pods": (int, 4),
    },
    "links": {
        "rate_gbps": ((int, float), 100),
        "delay_ns": (int, 1000),
        "mtu_bytes": (int, 4200),
        "buffer_bytes": (int, 1_000_000),
    },
    "emulation": {
        "dilation": ((int, float), 100),
        "xdp_mode": (str, "generic"),
        "delay_method": (str, "auto"),
        "pacer": (str, "auto"),
    },
}
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", list: "a list"}


def _typed(values: dict, table: str) -> dict:
    """Values of one table with defaults filled in and types checked."""
    schema = _SCHEMA[table]
    out = {}
    for key, value in values.items():
        full = f"{table}.{key}" if table else key
        if key not in schema:
            if table == "" and key in _SCHEMA:
                _fail(key, "must be a table ([" + key + "])")
            known = list(schema) + ([t for t in _SCHEMA if t] + list(LIVE_TABLES) + ["job", "control"] if table == "" else [])
            _fail(full, f"unknown key (known: {', '.join(known)})")
        types = schema[key][0] if isinstance(schema[key][0], tuple) else (schema[key][0],)
        # TOML booleans are ints to Python; never accept them as numbers.
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = "a number" if float in types else " or ".join(_TYPE_NAMES[t] for t in types)
            _fail(full, f"expected {wanted}, got {type(value).__name__} {value!r}")
        out[key] = value
    for key, (_type, default) in schema.items():
        out.setdefault(key, default)
    return out


def _host_names(value, key="topology.hosts") -> tuple[str, ...]:
    if isinstance(value, int):
        if value < 2:
            _fail(key, f"need at least 2 hosts, got {value}")
        return tuple(f"h{i}" for i in range(value))
    if len(value) < 2:
        _fail(key, f"need at least 2 hosts, got {len(value)}")
    seen = set()
    for name in value:
        if not isinstance(name, str) or not HOST_NAME.match(name):
            _fail(key, f"host name {name!r} must be 1-8 of [a-z0-9], starting with a letter")
        if name in seen:
            _fail(key, f"duplicate host name {name!r}")
        seen.add(name)
    return tuple(value)


def parse_scenario(data: dict, live: bool = True) -> Scenario:
    """live: also check what only a live run limits (the simulator's
    scenarios skip those checks)."""
    top = {k: v for k, v in data.items()
           if (k not in _SCHEMA or k == "") and k not in LIVE_TABLES and k not in ("job", "control")}
    general = _typed(top, "")
    tables = {}
    for table in ("topology", "links", "emulation"):
        raw = data.get(table, {})
        if not isinstance(raw, dict):
            _fail(table, "must be a table ([" + table + "])")
        tables[table] = _typed(raw, table)
    topo, links, emu = tables["topology"], tables["links"], tables["emulation"]

    kind = topo["kind"]
    if kind not in TOPOLOGY_KINDS:
        _fail("topology.kind", f"unknown topology kind {kind!r} (known: {', '.join(TOPOLOGY_KINDS)})")
    hosts = _host_names(topo["hosts"])
    given = data.get("topology", {})
    for key, kinds in (("leaves", ("leaf-spine",)), ("spines", ("leaf-spine",)), ("pods", ("fat-tree",))):
        if key in given and kind not in kinds:
            _fail(f"topology.{key}", f"only for kind = \"{kinds[0]}\"")
    pods = 0
    if kind == "tor":
        leaves, spines = 1, 0
    elif kind == "fat-tree":
        pods = topo["pods"]
        if pods % 2 or not 2 <= pods <= 32:
            _fail("topology.pods", f"a fat-tree's k must be even, 2..32, got {pods}")
        leaves, spines = pods * pods // 2, pods * pods // 4
        if len(hosts) > pods ** 3 // 4:
            _fail("topology.hosts", f"a fat-tree of k = {pods} holds at most {pods ** 3 // 4} hosts")
    else:
        leaves, spines = topo["leaves"], topo["spines"]
        if not 1 <= leaves <= 64:
            _fail("topology.leaves", f"must be 1..64, got {leaves}")
        if not 1 <= spines <= 64:
            _fail("topology.spines", f"must be 1..64, got {spines}")
        if len(hosts) < leaves:
            _fail("topology.hosts", f"{len(hosts)} hosts cannot fill {leaves} leaves")
    if len(hosts) > MAX_HOSTS:
        _fail("topology.hosts", f"at most {MAX_HOSTS} hosts (the address plan's /31 links), got {len(hosts)}")
    switch_names = {f"s{i}" for i in range(2 * leaves + spines if kind == "fat-tree" else leaves + spines)}
    clash = switch_names.intersection(hosts)
    if clash:
        _fail("topology.hosts", f"host name {sorted(clash)[0]!r} is a switch name (s0, s1, ...)")
    if topo["oversubscription"] <= 0:
        _fail("topology.oversubscription", f"must be positive, got {topo['oversubscription']}")

    if links["rate_gbps"] <= 0:
        _fail("links.rate_gbps", f"must be positive, got {links['rate_gbps']}")
    if links["delay_ns"] < 0:
        _fail("links.delay_ns", f"must not be negative, got {links['delay_ns']}")
    if links["buffer_bytes"] < links["mtu_bytes"]:
        _fail("links.buffer_bytes", f"must hold at least one MTU ({links['mtu_bytes']}), "
              f"got {links['buffer_bytes']}")
    if emu["dilation"] < 1:
        _fail("emulation.dilation", f"must be >= 1, got {emu['dilation']}")
    if emu["xdp_mode"] not in XDP_MODES:
        _fail("emulation.xdp_mode", f"must be one of {', '.join(XDP_MODES)}, got {emu['xdp_mode']!r}")
    if emu["delay_method"] not in DELAY_METHODS:
        _fail("emulation.delay_method",
              f"must be one of {', '.join(DELAY_METHODS)}, got {emu['delay_method']!r}")
    if emu["pacer"] not in PACERS:
        _fail("emulation.pacer", f"must be one of {', '.join(PACERS)}, got {emu['pacer']!r}")
    mtu = links["mtu_bytes"]
    if not MIN_MTU <= mtu <= VETH_MAX_MTU:
        _fail("links.mtu_bytes", f"must be {MIN_MTU}..{VETH_MAX_MTU} (the veth maximum), got {mtu}")

    scenario = Scenario(
        name=general["name"], kind=kind, hosts=hosts, leaves=leaves, spines=spines,
        oversubscription=float(topo["oversubscription"]), rate_gbps=float(links["rate_gbps"]),
        delay_ns=links["delay_ns"], mtu_bytes=mtu, buffer_bytes=links["buffer_bytes"],
        dilation=float(emu["dilation"]), xdp_mode=emu["xdp_mode"], delay_method=emu["delay_method"],
        pacer=emu["pacer"], pods=pods)
    if live:
        _check_live(scenario)
    live_cc, traffic = parse_live(data, hosts, scenario.rate_gbps, mtu)
    jobs = parse_jobs(data.get("job", []), hosts)
    if live:
        check_live_jobs(jobs)
    if jobs and "traffic" in data:
        _fail("traffic", "a scenario has [traffic] flows or [[job]] tables, not both")
    control = parse_control(data.get("control", {}))
    if "control" in data and not jobs:
        _fail("control", "a policy needs processes: [control] goes with [[job]] tables")
    return dataclasses.replace(scenario, live=live_cc, traffic=traffic, jobs=jobs, control=control)


def _check_live(scenario: Scenario) -> None:
    """What only the live testbed limits: the rates a veth carries after
    dilation, the MTU native XDP attaches at, and the topologies the
    testbed builds."""
    if math.ceil(len(scenario.hosts) / scenario.leaves) > MAX_LIVE_HOSTS_PER_SWITCH:
        _fail("topology.hosts", f"at most {MAX_LIVE_HOSTS_PER_SWITCH} hosts per switch live (a /24 per rack; "
              "the simulator has no such limit)")
    if scenario.kind not in LIVE_TOPOLOGY_KINDS:
        _fail("topology.kind", f"{scenario.kind} runs in the simulator only (the testbed builds "
              f"{' and '.join(LIVE_TOPOLOGY_KINDS)})")
    if scenario.xdp_mode == "native" and scenario.mtu_bytes > NATIVE_XDP_MAX_MTU:
        _fail("links.mtu_bytes", f"{scenario.mtu_bytes} is above {NATIVE_XDP_MAX_MTU}, the largest veth MTU native "
              "XDP attaches at here; use xdp_mode = \"generic\" or RoCE MTU 2048")
    for key, rate_gbps in (("links.rate_gbps", scenario.rate_gbps),
                           ("topology.oversubscription", scenario.fabric_rate_gbps)):
        live = rate_gbps * 1e9 / scenario.dilation
        if not MIN_LIVE_RATE_BPS <= live <= MAX_LIVE_RATE_BPS:
            _fail(key, f"the live rate ({live / 1e6:.3g} Mbit/s after dilation "
                  f"{scenario.dilation:g}) must be within 1 Mbit/s..40 Gbit/s")


def read_toml(path: str | Path) -> dict:
    """A TOML file's tables; ScenarioError naming the file if it cannot be
    read or parsed."""
    try:
        return tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML ({exc})") from None


def anchor_files(jobs, base: Path) -> None:
    """Make each job table's relative trace file relative to folder base
    (the file that names it), in place."""
    for job in jobs if isinstance(jobs, list) else ():
        trace = job.get("trace") if isinstance(job, dict) else None
        if isinstance(trace, dict) and isinstance(trace.get("file"), str):
            trace["file"] = str(base / trace["file"])


def read_scenario(path: str | Path) -> dict:
    """A scenario file's tables, its jobs' files made relative to it."""
    data = read_toml(path)
    anchor_files(data.get("job"), Path(path).parent)
    return data


def with_seeds(data: dict, offset: int, live: bool = True) -> Scenario:
    """Scenario tables `data` parsed with every job's seed moved on by
    offset: run r of a comparison or sweep, the same at every variant."""
    data = copy.deepcopy(data)
    for job in data.get("job", []):
        job["seed"] = job.get("seed", 1) + offset
    return parse_scenario(data, live)


def read_job_scenario(data: dict, base: Path, purpose: str) -> tuple[Path, dict]:
    """The job scenario a plan or sweep file names in its `scenario` key
    (relative to folder base): its path and tables. purpose: what it is
    read for, in the errors."""
    if not isinstance(data.get("scenario"), str):
        _fail("scenario", f"the scenario file to {purpose} is required (a path relative to this file)")
    path = base / data["scenario"]
    try:
        tables = read_scenario(path)
    except ScenarioError as exc:
        _fail("scenario", str(exc))
    if "job" not in tables:
        _fail("scenario", f"{path} has no [[job]] tables to {purpose}")
    return path, tables


def load_scenario(path: str | Path, live: bool = True) -> Scenario:
    return parse_scenario(read_scenario(path), live)
