"""TX engine throughput and pacing, side by side in one run, on a live
testbed inside a private sandbox (not a test: shared machines are noisy).

1. packets/s: the engine (heap, frame patching, ICRC, departure reads)
   against a bare loop that sends one prebuilt frame on the same socket;
   target >= 70%. Links at 10 Gbit/s live, so neither is held by the link.
2. pacing: one QP capped at half of a 1 Gbit/s link, achieved vs BPF rate
   over windows of 100 packets, and lateness against departure times.
"""
from __future__ import annotations

import tempfile
import time

from testbed.isolated import run_sandboxed

PAYLOAD = 1024


def _throughput():
    from dataplane.emulator import Emulator
    from dataplane.tx_engine import now_ns
    from testbed.builder import Testbed
    from testbed.scenario import parse_scenario
    from testbed.state import StateStore

    import os
    scenario = parse_scenario({"links": {"rate_gbps": 1000}, "traffic": {"flows": [["h0", "h1"]]}})
    with tempfile.TemporaryDirectory() as state, Testbed.up(scenario, StateStore(state)) as testbed:
        emu = Emulator(testbed, scenario.live)
        os.sched_setaffinity(0, {0})
        send_qpn, _ = emu.connect("h0", "h1")
        qp = emu.engine.qps[send_qpn]
        frame = qp.frames.frame(0x07, 0, PAYLOAD, 0)
        sock = emu.sockets["h0"]
        n, failed, end = 0, 0, now_ns() + 1_000_000_000
        while now_ns() < end:
            try:
                sock.send(frame)
                n += 1
            except OSError:
                failed += 1                       # a full qdisc: not a packet sent
        bare = n
        emu.engine.log_packets = False
        qp.mtu = PAYLOAD
        emu.engine.post(send_qpn, 2**31)
        emu.engine.run(duration_s=1.0)
        engine = qp.packets - emu.engine.send_errors
        emu.close()
        return bare, engine, failed


def _pacing():
    from dataplane.cc import Hook
    from dataplane.emulator import Emulator
    from dataplane.fidelity import qp_fidelity
    from testbed.builder import Testbed
    from testbed.scenario import parse_scenario
    from testbed.state import StateStore

    import os
    scenario = parse_scenario({"traffic": {"flows": [["h0", "h1"]]}})
    with tempfile.TemporaryDirectory() as state, Testbed.up(scenario, StateStore(state)) as testbed:
        emu = Emulator(testbed, scenario.live)
        os.sched_setaffinity(0, {0})
        send_qpn, _ = emu.connect("h0", "h1")
        emu.set_hook(0, Hook(rate_cap=1 << 19))
        emu.engine.post(send_qpn, 2**31)
        emu.engine.run(duration_s=3.0)
        f = qp_fidelity(send_qpn, emu.engine.qps[send_qpn].log, scenario.live_rate_bps)
        emu.close()
        return f


def main() -> None:
    bare, engine, failed = run_sandboxed(_throughput)
    print(f"TX engine vs a bare send loop, {PAYLOAD}-byte payloads, 1 s each (packets/s sent):")
    print(f"  bare loop {bare:>9,} ({failed:,} refused)   engine {engine:>9,}   "
          f"ratio {engine / bare:.2f} (target >= 0.70)")
    f = run_sandboxed(_pacing)
    print("Pacing, one QP capped at 500 Mb/s on a 1 Gb/s link, 3 s:")
    print(f"  achieved / BPF rate over 100-packet windows: median {f.rate_ratio_p50:.4f}, "
          f"{f.good_windows * 100:.1f}% within 5%")
    print(f"  lateness against departure: p50 {f.lateness_p50_us:.1f} us, p99 {f.lateness_p99_us:.1f} us")


if __name__ == "__main__":
    main()
