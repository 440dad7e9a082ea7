"""Long-lived RoCEv2 flows on a live testbed under the emulated RNICs:
the engine sends, and a sampler (run between packets, reading mmapped
maps) records per-flow delivered bytes, BPF rates, CNPs and the model
queue of every switch port."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from dataplane.counters import Sample, read_flow
from dataplane.fidelity import QpFidelity, qp_fidelity
from dataplane.nic import cc_trace_records
from dataplane.tx_engine import now_ns
from experiment.emulator import CC_TRACE_RECORDS, Emulator
from scenario.live import LiveCC
from testbed.topology import live_rate_bps

FLOW_MESSAGE_BYTES = 2**31          # one RDMA WRITE per flow, longer than any run


@dataclass
class FlowResult:
    src: str
    dst: str
    send_qpn: int
    recv_qpn: int
    packets_sent: int = 0
    packets_received: int = 0
    early_packets: int = 0
    ce_packets: int = 0
    cnps: int = 0
    cnps_merged: int = 0            # arrived while another waited for its due time (dropped)
    retransmits: int = 0            # packets the sender sent again (go-back-N)
    timeouts: int = 0               # retransmit timeouts
    naks: int = 0                   # PSN sequence errors the receiver NAKed
    duplicates: int = 0             # packets the receiver dropped as already taken
    fidelity: QpFidelity | None = None


@dataclass
class LiveResult:
    line_rate_bps: int
    flows: list[FlowResult]
    samples: list[Sample] = field(default_factory=list)
    queue_samples: dict[int, list[int]] = field(default_factory=dict)   # ifindex -> bytes
    pause_events: dict[int, int] = field(default_factory=dict)          # ifindex -> pauses sent
    paused_ns: dict[int, int] = field(default_factory=dict)             # ifindex -> time paused
    port_drops: dict[int, int] = field(default_factory=dict)            # ifindex -> tail drops
    send_errors: int = 0
    pacer: str = "cooperative"          # or "kernel" (sch_fq holds packets to their departure)
    cc_trace: list = field(default_factory=list)     # dataplane.nic.CcTraceRecord, when recorded

    def shares(self, start_s: float, window_s: float) -> list[list[float]]:
        """Each flow's delivered rate as a fraction of line rate, per window
        of window_s from start_s on."""
        t0 = self.samples[0].t_ns
        out = []
        edges = [s for s in self.samples if s.t_ns - t0 >= start_s * 1e9]
        i = 0
        while i < len(edges):
            j = i
            while j < len(edges) and edges[j].t_ns - edges[i].t_ns < window_s * 1e9:
                j += 1
            if j >= len(edges):
                break
            dt = (edges[j].t_ns - edges[i].t_ns) / 1e9
            out.append([(b.delivered_bytes - a.delivered_bytes) * 8 / dt / self.line_rate_bps
                        for a, b in zip(edges[i].flows, edges[j].flows)])
            i = j
        return out


def run_flows(testbed, live: LiveCC, flows: list[tuple[str, str]], duration_s: float,
              sample_every_s: float = 0.01, engine_cpu: int = 0, during=None,
              settle_s: float = 0.0, hooks: dict | None = None, procs: list[int] | None = None,
              cc_trace: bool = False) -> LiveResult:
    """Bring up the RNICs on testbed, send one long flow per (src, dst)
    for duration_s, sample, and report. The engine pins itself to one CPU
    (a busy-waiting engine sharing a core with the dataplane loses rate).
    during: (seconds after start, callable) run once then from the sampler,
    e.g. to start a capture in another process. Engine fidelity is judged
    on the packets after settle_s (start-up, when every flow starts at line
    rate, is a transient). hooks: PRC hooks (dataplane.cc.Hook) by process,
    set before the flows start; procs: the process each flow's QPs belong
    to (default: all to process 0); cc_trace: record every CC event the
    RNICs apply (result.cc_trace), for replay through another build of
    the core."""
    affinity = os.sched_getaffinity(0)
    if engine_cpu not in affinity:
        engine_cpu = None
    emu = Emulator(testbed, live, engine_cpu,       # steers receive work off the engine's CPU
                   cc_trace_records=CC_TRACE_RECORDS if cc_trace else 0)
    if engine_cpu is not None:
        os.sched_setaffinity(0, {engine_cpu})
    try:
        results = []
        for (src, dst), proc in zip(flows, procs or [0] * len(flows)):
            send_qpn, recv_qpn = emu.connect(src, dst, proc)
            results.append(FlowResult(src, dst, send_qpn, recv_qpn))
        for proc, hook in (hooks or {}).items():
            emu.set_hook(proc, hook)
        result = LiveResult(live_rate_bps(testbed.plan.scenario), results, pacer=emu.pacer)
        switch_ports = [p.ifindex for node in testbed.plan.switches for p in testbed.plan.ports(node)]
        stats_view = emu.stats_view
        result.queue_samples = {i: [] for i in switch_ports}
        period = int(sample_every_s * 1e9)
        next_sample = [0]
        trace_chunks: list[bytes] = []       # raw records: converted once the run is over

        start = now_ns()
        pending = list(during or [])

        def sample() -> bool:
            now = now_ns()
            while pending and now - start >= pending[0][0] * 1e9:
                pending.pop(0)[1]()
            if now >= next_sample[0]:
                next_sample[0] = now + period
                tx, rx = emu.tx_view, emu.rx_view
                result.samples.append(Sample(now, [read_flow(tx, rx, f.send_qpn, f.recv_qpn) for f in results]))
                for i in switch_ports:
                    result.queue_samples[i].append(stats_view[i].q_bytes)
                if cc_trace:
                    trace_chunks.append(emu.nic.drain_cc_trace())
            return False

        # what `prc-emu top` needs to follow the run from another process
        testbed.record["live"] = {"maps": emu.map_ids(), "line_rate_bps": result.line_rate_bps,
                                  "dilation": testbed.plan.scenario.dilation,
                                  "flows": [[f.src, f.dst, f.send_qpn, f.recv_qpn] for f in results]}
        testbed.store.write(testbed.record)
        for f in results:
            emu.engine.post(f.send_qpn, FLOW_MESSAGE_BYTES)
        emu.engine.run(duration_s=duration_s, until=sample)
        result.send_errors = emu.engine.send_errors
        result.pause_events = {i: stats_view[i].pause_events for i in switch_ports}
        result.paused_ns = {i: stats_view[i].paused_ns for i in switch_ports}
        result.port_drops = {i: stats_view[i].drops for i in switch_ports}
        time.sleep(0.05)                     # the last packets reach the receiver
        if cc_trace:
            trace_chunks.append(emu.nic.drain_cc_trace())
            result.cc_trace = cc_trace_records(b"".join(trace_chunks))
        for f in results:
            qp = emu.engine.qps[f.send_qpn]
            tx, rx = emu.tx_view[f.send_qpn], emu.rx_view[f.recv_qpn]
            f.packets_sent, f.early_packets = qp.packets, tx.early_packets
            f.packets_received, f.ce_packets, f.cnps = rx.packets, rx.ce_packets, rx.cnps_sent
            f.cnps_merged = tx.cnps_merged
            f.retransmits, f.timeouts, f.naks, f.duplicates = qp.retransmits, qp.timeouts, rx.naks_sent, rx.duplicates
            f.fidelity = qp_fidelity(f.send_qpn, qp.log, result.line_rate_bps,
                                     since_ns=start + int(settle_s * 1e9))
        return result
    finally:
        emu.close()
        os.sched_setaffinity(0, affinity)      # the caller gets its CPUs back
