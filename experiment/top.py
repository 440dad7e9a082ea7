"""`prc-emu top`: live per-QP rates of a running `prc-emu run`, read from
its BPF maps (found by the ids its testbed record holds) without disturbing
it: the maps are mmapped, no syscalls per read."""
from __future__ import annotations

import sys
import time

from dataplane.bpf_mmap import MmapArray
from dataplane.bpf_objects import map_fd_by_id
from dataplane.counters import FlowCounters, read_flow
from dataplane.nic import MAX_QPS, QpRx, QpTx


def _live_records(store) -> list[dict]:
    out = []
    for run_id in store.run_ids():
        try:
            record = store.read(run_id)
        except (OSError, ValueError):
            continue
        if "live" in record:
            out.append(record)
    return out


def snapshot(tx: MmapArray, rx: MmapArray, flows) -> list[FlowCounters]:
    return [read_flow(tx, rx, send, recv) for _src, _dst, send, recv in flows]


def render(record: dict, before: list[FlowCounters], after: list[FlowCounters], dt: float) -> str:
    live = record["live"]
    line, d = live["line_rate_bps"], live["dilation"]
    lines = [f"{record['run_id']}: {len(live['flows'])} flows, line {line / 1e6:g} Mb/s live "
             f"(x{d:g} datacenter)",
             f"{'QP':>5} {'flow':<10} {'BPF Mb/s':>10} {'sent Mb/s':>10} {'recv Mb/s':>10} {'alpha':>7} "
             f"{'CNPs':>7} {'CE':>8}"]
    for (src, dst, send, _r), b, a in zip(live["flows"], before, after):
        sent_mbps = (a.sent_bytes - b.sent_bytes) * 8 / dt / 1e6
        recv_mbps = (a.delivered_bytes - b.delivered_bytes) * 8 / dt / 1e6
        lines.append(f"{send:>5} {src + '->' + dst:<10} {a.rate * line / 1e6:>10.1f} {sent_mbps:>10.1f} "
                     f"{recv_mbps:>10.1f} {a.alpha:>7.3f} {a.cnps:>7} {a.ce_marks:>8}")
    return "\n".join(lines)


def main(state_dir: str | None, interval_s: float, count: int) -> int:
    from testbed.state import StateStore, state_dir as resolve

    store = StateStore(resolve(state_dir))
    records = _live_records(store)
    if not records:
        print(f"prc-emu: no running experiment in {store.dir} (start one with prc-emu run)", file=sys.stderr)
        return 1
    record = records[-1]
    maps = record["live"]["maps"]
    try:
        tx = MmapArray(None, QpTx, map_fd_by_id(maps["qp_tx"]), MAX_QPS)
        rx = MmapArray(None, QpRx, map_fd_by_id(maps["qp_rx"]), MAX_QPS)
    except OSError as exc:
        print(f"prc-emu: the run {record['run_id']} has ended ({exc})", file=sys.stderr)
        return 1
    flows = record["live"]["flows"]
    shown = 0
    try:
        while count == 0 or shown < count:
            before = snapshot(tx, rx, flows)
            time.sleep(interval_s)
            print(render(record, before, snapshot(tx, rx, flows), interval_s), flush=True)
            shown += 1
    except KeyboardInterrupt:
        pass
    return 0
