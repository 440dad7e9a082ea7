"""`prc-emu run --record-cc` writes every CC event the RNICs applied
(cc_trace.bin, with the core's parameters in cc_trace.json);
`prc-emu cc doca-replay RUN` replays them through the DOCA PCC adapter as a
BlueField-3 would deliver them and says whether every rate and state came
out the same (docs/doca-port.md)."""
from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

from dataplane.cc import EV_CNP, Params
from dataplane.nic import CcTraceRecord

TRACE_FILE, TRACE_META = "cc_trace.bin", "cc_trace.json"
RECORD_BYTES = ctypes.sizeof(CcTraceRecord)


def write_trace(out, records, params: Params) -> None:
    """Into a results folder (ResultsWriter): the records ordered by QP and
    seq, and what a replay needs besides."""
    records = sorted(records, key=lambda r: (r.qpn, r.seq))
    (out.dir / TRACE_FILE).write_bytes(b"".join(bytes(r) for r in records))
    out.json(TRACE_META, {"record_bytes": RECORD_BYTES, "records": len(records),
                          "params": {name: getattr(params, name) for name, _ in Params._fields_}})


def read_trace(run: Path) -> tuple[list[CcTraceRecord], Params]:
    """ValueError with one line naming what is wrong."""
    try:
        meta = json.loads((run / TRACE_META).read_text())
        raw = (run / TRACE_FILE).read_bytes()
    except FileNotFoundError as exc:
        raise ValueError(f"{run}: no {Path(exc.filename).name} (record one with `prc-emu run SCENARIO "
                         f"--record-cc`)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{run}: cannot read the trace ({exc})") from None
    if meta.get("record_bytes") != RECORD_BYTES or len(raw) != RECORD_BYTES * meta.get("records", -1):
        raise ValueError(f"{run / TRACE_FILE}: {len(raw)} bytes is not {meta.get('records')} records of "
                         f"{RECORD_BYTES} bytes")
    try:
        params = Params(**meta["params"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{run / TRACE_META}: bad params ({exc})") from None
    return [CcTraceRecord.from_buffer_copy(raw, i) for i in range(0, len(raw), RECORD_BYTES)], params


def main(run: str) -> int:
    from dataplane.doca_device import DocaDevice, replay_trace

    try:
        records, params = read_trace(Path(run))
        report = replay_trace(DocaDevice(), records, params)
    except ValueError as exc:
        print(f"prc-emu: {exc}", file=sys.stderr)
        return 2
    cnps = sum(r.kind == EV_CNP for r in records)
    print(f"replayed {report.events:,} CC events ({cnps:,} CNPs) of {report.flows} QPs through the DOCA PCC "
          f"adapter, with {report.hook_messages:,} hook changes through its mailbox; the flows' 32-bit clocks "
          f"wrapped {report.wraps} times")
    print(f"  rates differing: {len(report.rate_mismatches)}; other state words differing: "
          f"{len(report.state_mismatches)}")
    for qpn, seq, bpf, adapter in report.rate_mismatches[:5]:
        print(f"  QP {qpn} event {seq}: RNIC rate {bpf}, adapter {adapter} (2^-20 of line)")
    print("bit-exact" if report.exact else "NOT bit-exact")
    return 0 if report.exact else 1
