"""A scenario's jobs on a live testbed: the workload's ranks drive the
emulated RNICs through a transport whose messages are RDMA WRITEs on RC
QPs (one per pair of ranks, owned by the sending rank's NIC process),
whose send completions are the ACKs' and whose receive completions are
nic_rx's stamps, both made visible after the path's delay."""
from __future__ import annotations

import collections
import os

from control.controller import Controller
from dataplane import roce
from dataplane.tx_engine import now_ns
from dataplane.nic import cc_trace_records
from experiment.emulator import CC_TRACE_RECORDS, Emulator
from testbed.probes import backlog_drops
from testbed.topology import live_rate_bps
from workload import events as ev
from workload.driver import Workload
from workload.result import WorkloadResult
from workload.transport import Endpoint

SAMPLE_EVERY_NS = 2_000_000         # per-process delivered bytes and switch queues, over time


class LiveTransport:
    """workload.transport.Transport over an Emulator."""

    def __init__(self, emu: Emulator):
        self.emu = emu
        self.engine = emu.engine
        self._qps: dict[tuple[int, int], tuple[int, int]] = {}      # (src proc, dst proc) -> QPNs
        self._arrivals: dict[int, collections.deque] = {}           # receiving QPN -> on_received, in order
        self.fresh_starts = 0

    def now_ns(self) -> int:
        return now_ns()

    def call_at(self, t_ns: int, fn) -> None:
        self.engine.call_at(t_ns, fn)

    def connect(self, src: Endpoint, dst: Endpoint) -> tuple[int, int]:
        key = (src.proc, dst.proc)
        if key not in self._qps:
            send_qpn, recv_qpn = self.emu.connect(src.host, dst.host, src.proc)
            self._qps[key] = send_qpn, recv_qpn
            arrivals = self._arrivals[recv_qpn] = collections.deque()
            self.emu.watch_receives(recv_qpn, lambda _qpn, _msn, t: arrivals.popleft()(t))
        return self._qps[key]

    def qps(self) -> dict[tuple[int, int], tuple[int, int]]:
        return dict(self._qps)

    def send(self, src: Endpoint, dst: Endpoint, nbytes: int, fresh: bool, on_sent, on_received) -> None:
        if src.host == dst.host:          # NVLink, not the NIC: at once
            t = now_ns()
            self.engine.call_at(t, lambda: on_received(t))
            self.engine.call_at(t, lambda: on_sent(t))
            return
        send_qpn, recv_qpn = self.connect(src, dst)
        if fresh and self.engine.qps[send_qpn].idle:
            self.emu.nic.fresh_cc(send_qpn)
            self.fresh_starts += 1
        self._arrivals[recv_qpn].append(on_received)
        self.engine.post(send_qpn, nbytes, on_complete=lambda m: on_sent(m.completed_ns))


def run_workload(testbed, scenario, engine_cpu: int = 0, limit_s: float = 600.0, progress=None,
                 cc_trace: bool = False) -> WorkloadResult:
    """Run the scenario's jobs on testbed until every training job is done
    (or limit_s live seconds). progress(event) sees every event; cc_trace:
    record every CC event the RNICs apply (result.cc_trace)."""
    live = scenario.live
    affinity = os.sched_getaffinity(0)
    if engine_cpu not in affinity:
        engine_cpu = None
    emu = Emulator(testbed, live, engine_cpu, cc_trace_records=CC_TRACE_RECORDS if cc_trace else 0)
    emu.engine.log_packets = False      # no per-packet fidelity log: a workload run reports none
    if engine_cpu is not None:
        os.sched_setaffinity(0, {engine_cpu})
    try:
        transport = LiveTransport(emu)
        bus = ev.EventBus()
        result = WorkloadResult(live_rate_bps(scenario))
        bus.subscribe(result.events.append)
        if progress is not None:
            bus.subscribe(progress)
        workload = Workload(scenario.jobs, transport, scenario.dilation, bus)
        for src, dst in workload.connections():
            if src.host != dst.host:
                transport.connect(src, dst)
        result.procs = workload.procs()
        qps_of_proc = collections.defaultdict(list)
        for (src_proc, _dst), (_s, recv_qpn) in transport.qps().items():
            qps_of_proc[src_proc].append(recv_qpn)
        result.proc_bytes = {proc: [] for proc in qps_of_proc}
        plan = testbed.plan
        ports = {f"{p.node}:{plan.peer(p).node}": p.ifindex for node in plan.switches for p in plan.ports(node)}
        result.queue_bytes = {name: [] for name in ports}
        rx, stats = emu.rx_view, emu.stats_view
        next_sample = [0]
        trace_chunks: list[bytes] = []

        def until() -> bool:
            now = now_ns()
            if now >= next_sample[0]:
                next_sample[0] = now + SAMPLE_EVERY_NS
                for proc, qpns in qps_of_proc.items():
                    result.proc_bytes[proc].append((now, sum(rx[q].delivered_bytes for q in qpns)))
                for name, ifindex in ports.items():
                    result.queue_bytes[name].append((now, stats[ifindex].q_bytes))
                if cc_trace:
                    trace_chunks.append(emu.nic.drain_cc_trace())
            return workload.finished

        controller = Controller(scenario.control, workload, emu.hooks, scenario.dilation)
        controller.start()
        backlog_before = backlog_drops()
        start = now_ns()
        workload.start()
        emu.engine.run(duration_s=limit_s, until=until)
        result.wall_s = (now_ns() - start) / 1e9
        if cc_trace:
            trace_chunks.append(emu.nic.drain_cc_trace())
            result.cc_trace = cc_trace_records(b"".join(trace_chunks))
        result.finished = workload.finished
        result.backlog_drops = backlog_drops() - backlog_before
        result.pause_events = sum(stats[i].pause_events for i in ports.values())
        result.paused_ns = sum(stats[i].paused_ns for i in ports.values())
        result.port_drops = sum(stats[i].drops for i in ports.values())
        result.send_errors = emu.engine.send_errors
        result.fresh_starts = transport.fresh_starts
        result.decisions, result.reaction_ns = controller.decisions, controller.reaction_ns
        for (src_proc, dst_proc), (send_qpn, recv_qpn) in transport.qps().items():
            qp, r = emu.engine.qps[send_qpn], rx[recv_qpn]
            result.qp_stats.append({"job": result.procs[src_proc][0], "src_rank": result.procs[src_proc][1],
                                    "dst_rank": result.procs[dst_proc][1], "send_qpn": send_qpn,
                                    "payload_received": roce.write_payload_bytes(r.delivered_bytes, r.delivered_packets,
                                                                                r.messages), "messages_received": r.messages,
                                    "retransmits": qp.retransmits, "timeouts": qp.timeouts,
                                    "naks": r.naks_sent, "cnps": r.cnps_sent, "ce_packets": r.ce_packets})
        return result
    finally:
        emu.close()
        os.sched_setaffinity(0, affinity)
