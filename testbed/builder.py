"""Bring a planned testbed up and take it down again.

Every create is preceded by a state-file write naming the run prefix, so
that `clean` can always find what a run made; a failure or SIGINT/SIGTERM
during `up` rolls back what was built. Nothing is created or changed in the
namespace the caller runs in: only named testbed namespaces, and what the
children that enter them configure inside.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import asdict

from testbed.features import qdisc_problem
from testbed.isolated import run_in_netns
from testbed.node_setup import configure_node, create_veths, node_sysctls, write_sysctls
from scenario.spec import Scenario, ScenarioError
from testbed.state import StateStore
from testbed.topology import Plan, live_delay_ns, plan_topology

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STEP_TIMEOUT_S = 120


class TestbedError(RuntimeError):
    """The testbed could not be built or found; str() is one line."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived while a testbed was up or being built. A
    BaseException, like KeyboardInterrupt, so that `except Exception`
    around library calls (bcc raises bare Exception) cannot swallow it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _signals_blocked():
    """No signal between a create and the record of its undo."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def _interrupts_raise():
    """SIGINT/SIGTERM raise Interrupted in this process, so the rollback
    runs. pyroute2 forks helpers that inherit handlers and are stopped with
    SIGTERM: in any other process the handler just exits."""
    owner = os.getpid()

    def handler(signum, _frame):
        if os.getpid() != owner:
            os._exit(128 + signum)
        raise Interrupted(signum)

    old = {s: signal.signal(s, handler) for s in _SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


FQ_LIMIT_PACKETS = 10_000


def _resolve(key: str, asked: str, qdisc: str, with_it: str, without_it: str) -> str:
    """A choice that depends on whether a qdisc exists here: 'auto' picks
    with_it where it does; asking for with_it where it does not is an error
    before anything is built."""
    problem = qdisc_problem(qdisc)
    if asked == "auto":
        return without_it if problem else with_it
    if asked == with_it and problem:
        raise ScenarioError(f"{key}: {with_it} needs sch_{qdisc}, which is not available here ({problem})")
    return asked


def resolve_delay_method(asked: str) -> str:
    """netem where the kernel has it (unless told otherwise), else the links
    add no delay (see docs/scenario.md)."""
    return _resolve("emulation.delay_method", asked, "netem", "netem", "endpoint")


def resolve_pacer(asked: str) -> str:
    """kernel (nic_tx stamps skb->tstamp, sch_fq on each host NIC holds
    packets until then) where sch_fq exists, else cooperative (the TX
    engine waits for each departure time)."""
    return _resolve("emulation.pacer", asked, "fq", "kernel", "cooperative")


# The switch port's model (bpf/switch_port.c) holds the emulated buffer and
# drops what it cannot hold; the real queue behind it runs behind the model
# whenever a CPU stalls, and its drops would be the machine's, not the
# network's (with go-back-N each costs a queue's worth of resends). So it
# holds this many buffers.
REAL_QUEUE_BUFFERS = 4


def leaf_qdisc(scenario: Scenario, delay_method: str, pacer: str, port) -> str:
    """The qdisc under a port's HTB class: REAL_QUEUE_BUFFERS of the port's
    buffer, with the link's delay where netem does it. With the kernel pacer, a host NIC's leaf is
    sch_fq, and the delay of its uplink moves to the switch port facing the
    host (which then delays twice): every path and RTT keeps its length."""
    host_nic = port.node in scenario.hosts
    if pacer == "kernel" and host_nic:
        # every QP of a host leaves through one packet socket: one fq flow
        return f"fq limit {FQ_LIMIT_PACKETS} flow_limit {FQ_LIMIT_PACKETS}"
    if delay_method == "netem":
        packets = max(1, REAL_QUEUE_BUFFERS * scenario.buffer_bytes // (scenario.mtu_bytes + 14))
        hops = 2 if pacer == "kernel" and port.faces == "host" else 1
        return f"netem delay {max(1, hops * live_delay_ns(scenario) // 1000)}us limit {packets}"
    return f"bfifo limit {REAL_QUEUE_BUFFERS * scenario.buffer_bytes}"


def _existing_netns() -> set[str]:
    from pyroute2 import netns
    return set(netns.listnetns())


def _new_run_id(store: StateStore) -> str:
    taken = set(store.run_ids())
    names = _existing_netns()
    for _ in range(100):
        run_id = f"p{secrets.randbelow(1 << 16):04x}"
        if run_id not in taken and not any(n.startswith(run_id + "-") for n in names):
            return run_id
    raise TestbedError("no free run id")


class Testbed:
    """A running testbed. Use as a context manager, or up() then down()."""

    def __init__(self, plan: Plan, store: StateStore, record: dict):
        self.plan = plan
        self.store = store
        self.record = record
        self._xdp = None   # bcc.BPF holding the pass-through program, native mode
        self._signal_scope = None

    @property
    def run_id(self) -> str:
        return self.plan.prefix

    def netns(self, node: str) -> str:
        return self.plan.netns(node)

    @classmethod
    def up(cls, scenario: Scenario, store: StateStore, scenario_path: str | None = None) -> "Testbed":
        delay_method = resolve_delay_method(scenario.delay_method)
        pacer = resolve_pacer(scenario.pacer)
        run_id = _new_run_id(store)
        plan = plan_topology(scenario, run_id)
        record = {
            "run_id": run_id, "status": "building", "pid": os.getpid(),
            "created_unix_s": time.time(), "scenario_path": scenario_path,
            "scenario": asdict(scenario), "delay_method": delay_method,
            "pacer": pacer,
            "namespaces": [], "prog_ids": [],
            "hosts": {h: {"netns": plan.netns(h), "addr": plan.host_addr(h)} for h in plan.hosts},
        }
        testbed = cls(plan, store, record)
        with _interrupts_raise():
            try:
                testbed._build(delay_method)
            except BaseException:
                testbed.down()
                raise
        return testbed

    def _build(self, delay_method: str) -> None:
        from pyroute2 import netns

        self.store.write(self.record)   # the prefix is on record before anything exists
        for node in self.plan.nodes:
            name = self.plan.netns(node)
            with _signals_blocked():
                netns.create(name)
                self.record["namespaces"].append(name)
                self.store.write(self.record)
        for node in self.plan.nodes:
            run_in_netns(self.netns(node), write_sysctls, node_sysctls(self.plan, node),
                         timeout_s=STEP_TIMEOUT_S)
        for node in self.plan.nodes:
            create_veths(self.plan, node)   # ip -n: acts inside the named namespace only
        xdp_fd = self._load_pass_through() if self.plan.scenario.xdp_mode == "native" else None
        leaves = {p.ifindex: leaf_qdisc(self.plan.scenario, delay_method, self.record["pacer"], p)
                  for node in self.plan.nodes for p in self.plan.ports(node)}
        for node in self.plan.nodes:
            run_in_netns(self.netns(node), configure_node, self.plan, node, xdp_fd, leaves,
                         timeout_s=STEP_TIMEOUT_S)
        self.record["status"] = "up"
        self.store.write(self.record)

    def _load_pass_through(self) -> int:
        from bcc import BPF

        from dataplane.bpf_build import compile_bpf
        from dataplane.bpf_objects import prog_id

        self._xdp = compile_bpf("xdp_pass")
        fd = self._xdp.load_func("xdp_pass", BPF.XDP).fd
        self.record["prog_ids"].append(prog_id(fd))
        self.store.write(self.record)
        return fd

    def down(self) -> list[str]:
        """Remove every namespace of this run and its state file."""
        if self._xdp is not None:
            self._xdp.cleanup()
            self._xdp = None
        return remove_run(self.store, self.run_id, self.record)

    def __enter__(self) -> "Testbed":
        # SIGTERM, like SIGINT, unwinds the with-body so that __exit__ runs.
        self._signal_scope = _interrupts_raise()
        self._signal_scope.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        try:
            with _signals_blocked():
                self.down()
        finally:
            self._signal_scope.__exit__(None, None, None)


def remove_run(store: StateStore, run_id: str, record: dict | None = None) -> list[str]:
    """Delete the namespaces a run's record names and any others under its
    prefix (made after the last record write), then the record. Returns the
    namespaces removed. Namespaces outside the prefix are never touched."""
    from pyroute2 import netns

    if record is None:
        try:
            record = store.read(run_id)
        except FileNotFoundError:
            raise TestbedError(f"no testbed run {run_id} in {store.dir}") from None
    existing = _existing_netns()
    targets = {n for n in record.get("namespaces", []) if n.startswith(run_id + "-")}
    targets |= {n for n in existing if n.startswith(run_id + "-")}
    removed = []
    with _signals_blocked():
        for name in sorted(targets & existing):
            netns.remove(name)
            removed.append(name)
        store.remove(run_id)
    return removed
