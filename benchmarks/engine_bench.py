"""TX engine throughput and pacing, side by side in one run, on a live
testbed inside a private sandbox (not a test: shared machines are noisy).

1. packets/s: the engine (scheduler, frame patching, ICRC, departure
   reads, packet log), with one QP and with eight, against bare loops that
   send one prebuilt frame on the same socket, in Python and in C; target
   >= 70%. Links at 1 Tbit/s live, so
   none is held by the link.
2. pacing: one QP capped at half of a 1 Gbit/s link, achieved vs BPF rate
   over windows of 100 packets, and lateness against departure times.
"""
from __future__ import annotations

import ctypes
import tempfile

from testbed.isolated import run_sandboxed

PAYLOAD = 1024


def _throughput():
    from experiment.emulator import Emulator
    from dataplane.tx_engine import now_ns
    from dataplane.tx_native import library
    from testbed.builder import Testbed
    from scenario.spec import parse_scenario
    from testbed.state import StateStore

    import os
    scenario = parse_scenario({"links": {"rate_gbps": 1000}, "traffic": {"flows": [["h0", "h1"]]}})
    with tempfile.TemporaryDirectory() as state, Testbed.up(scenario, StateStore(state)) as testbed:
        emu = Emulator(testbed, scenario.live)
        os.sched_setaffinity(0, {0})
        send_qpn, _ = emu.connect("h0", "h1")
        qp = emu.engine.qps[send_qpn]
        frame = bytes(qp.frames.frame(0x07, 0, PAYLOAD, 0))
        sock = emu.sockets["h0"]
        n, failed, end = 0, 0, now_ns() + 1_000_000_000
        while now_ns() < end:
            try:
                sock.send(frame)
                n += 1
            except OSError:
                failed += 1                       # a full qdisc: not a packet sent
        bare_py = (n, failed)
        refused = ctypes.c_uint64()
        bare_c = (library().tx_bare_send(sock.fileno(), frame, len(frame), 1_000_000_000,
                                         ctypes.byref(refused)), refused.value)
        qp.mtu = PAYLOAD
        emu.engine.post(send_qpn, 2**31)
        emu.engine.run(duration_s=1.0)
        engine = (qp.packets - qp.send_errors, qp.send_errors)
        # eight QPs on the same socket: the scheduler picks one per packet
        qps = [qp] + [emu.engine.qps[emu.connect("h0", "h1")[0]] for _ in range(7)]
        for other in qps[1:]:
            other.mtu = PAYLOAD
            emu.engine.post(other.qpn, 2**31)
        before = sum(q.packets - q.send_errors for q in qps), sum(q.send_errors for q in qps)
        emu.engine.run(duration_s=1.0)
        multi = (sum(q.packets - q.send_errors for q in qps) - before[0],
                 sum(q.send_errors for q in qps) - before[1])
        emu.close()
        return bare_py, bare_c, engine, multi


def _pacing():
    from dataplane.cc import Hook
    from dataplane.fidelity import qp_fidelity
    from experiment.emulator import Emulator
    from scenario.spec import parse_scenario
    from testbed.builder import Testbed
    from testbed.state import StateStore
    from testbed.topology import live_rate_bps

    import os
    scenario = parse_scenario({"traffic": {"flows": [["h0", "h1"]]}})
    with tempfile.TemporaryDirectory() as state, Testbed.up(scenario, StateStore(state)) as testbed:
        emu = Emulator(testbed, scenario.live)
        os.sched_setaffinity(0, {0})
        send_qpn, _ = emu.connect("h0", "h1")
        emu.set_hook(0, Hook(rate_cap=1 << 19))
        emu.engine.post(send_qpn, 2**31)
        emu.engine.run(duration_s=3.0)
        f = qp_fidelity(send_qpn, emu.engine.qps[send_qpn].log, live_rate_bps(scenario))
        emu.close()
        return f


def main() -> None:
    bare_py, bare_c, engine, multi = run_sandboxed(_throughput)
    print(f"TX engine vs bare send loops, {PAYLOAD}-byte payloads, 1 s each "
          f"(packets/s the socket took, refused):")
    for name, (n, refused) in (("bare loop, Python", bare_py), ("bare loop, C", bare_c),
                               ("engine, 1 QP", engine), ("engine, 8 QPs", multi)):
        print(f"  {name:<18} {n:>9,} ({refused:,} refused)")
    for name, (n, _) in (("1 QP", engine), ("8 QPs", multi)):
        print(f"  engine ({name}) / bare Python {n / bare_py[0]:.2f}, / bare C {n / bare_c[0]:.2f} "
              f"(target >= 0.70)")
    f = run_sandboxed(_pacing)
    print("Pacing, one QP capped at 500 Mb/s on a 1 Gb/s link, 3 s:")
    print(f"  achieved / BPF rate over 100-packet windows: median {f.rate_ratio_p50:.4f}, "
          f"{f.good_windows * 100:.1f}% within 5%")
    print(f"  lateness against departure: p50 {f.lateness_p50_us:.1f} us, p99 {f.lateness_p99_us:.1f} us")


if __name__ == "__main__":
    main()
