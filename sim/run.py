"""A scenario's jobs in the simulator: the same topology plan, workload
programs, controller and policies as a live run, over the fluid network
(sim.network) instead of the emulated RNICs; the same WorkloadResult,
in the same live time scale, so one report reads both."""
from __future__ import annotations

import time
import zlib

import numpy as np

from control.controller import Controller
from sim.fabric import Fabric
from sim.network import FluidNetwork, Hooks
from sim.transport import SimTransport
from testbed.topology import live_rate_bps, plan_topology
from workload import events as ev
from workload.driver import Workload
from workload.result import WorkloadResult

SAMPLE_EVERY_NS = 2_000_000         # per-process bytes and switch queues over time, as live runs sample them
DEFAULT_STEP_US = 1.0               # datacenter microseconds


def marking_seed(scenario) -> int:
    """The seed of the marking draws: from the jobs' seeds, so a run with
    the same seeds marks the same packets whatever the policy."""
    return zlib.crc32(repr([(j.name, j.seed) for j in scenario.jobs]).encode())


def run_sim(scenario, step_us: float = DEFAULT_STEP_US, limit_s: float = 600.0, progress=None,
            cc=None) -> WorkloadResult:
    """Run the scenario's jobs until every training job is done (or limit_s
    of simulated live time). progress(event) sees every event; cc: a
    dataplane.cc.HostCC to reuse."""
    started = time.perf_counter()
    plan = plan_topology(scenario, "p0000")
    live = scenario.live
    bus = ev.EventBus()
    result = WorkloadResult(live_rate_bps(scenario))
    bus.subscribe(result.events.append)
    if progress is not None:
        bus.subscribe(progress)
    procs = sum(j.ranks for j in scenario.jobs)
    hooks = Hooks(procs)
    network = FluidNetwork(Fabric(plan, live), live, scenario.dilation, result.line_rate_bps, hooks,
                           marking_seed(scenario), cc)
    transport = SimTransport(network, step_us * 1000 * scenario.dilation)
    workload = Workload(scenario.jobs, transport, scenario.dilation, bus)
    for src, dst in workload.connections():
        if src.host != dst.host:
            transport.connect(src, dst)
    result.procs = workload.procs()
    result.proc_bytes = {p: [] for p in sorted({src for src, _dst in transport.qps()})}
    result.queue_bytes = {name: [] for name in network.fabric.names}

    def sample() -> None:
        now = transport.now_ns()
        sent = network.delivered_by_proc(procs)
        for p, series in result.proc_bytes.items():
            series.append((now, int(sent[p])))
        for name, q in zip(network.fabric.names, network.queue):
            result.queue_bytes[name].append((now, int(q)))
        if not workload.finished:
            transport.call_at(now + SAMPLE_EVERY_NS, sample)

    controller = Controller(scenario.control, workload, hooks, scenario.dilation)
    controller.start()
    workload.start()
    sample()
    transport.run(lambda: workload.finished, limit_s * 1e9)
    result.finished = workload.finished
    result.wall_s = time.perf_counter() - started
    result.pause_events, result.paused_ns = network.pause_events, int(network.paused_ns)
    result.port_drops = int(network.dropped_bytes / network.packet_payload)
    result.fresh_starts = network.fresh_starts
    result.decisions, result.reaction_ns = controller.decisions, controller.reaction_ns
    for (src_proc, dst_proc), qp in transport.qps().items():
        job, src_rank = result.procs[src_proc]
        result.qp_stats.append({"job": job, "src_rank": src_rank, "dst_rank": result.procs[dst_proc][1],
                                "send_qpn": qp, "payload_received": int(network.sent[qp]),
                                "messages_received": int(network.messages[qp]),
                                "retransmits": int(np.ceil(network.dropped[qp] / network.packet_payload)),
                                "timeouts": 0, "naks": 0, "cnps": int(network.cnps[qp]),
                                "ce_packets": int(round(network.ce_packets[qp]))})
    result.simulator = {"step_us": step_us, "steps": transport.steps, "qps": len(network.qps),
                        "cc_events": network.cc_events,
                  "simulated_s": transport.now_ns() / 1e9}
    return result
