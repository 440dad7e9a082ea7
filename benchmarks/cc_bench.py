"""CC core speed, measured side by side in one run (not a test: these
machines are shared and noisy).

BPF build: ns per event through BPF_PROG_TEST_RUN (kernel-timed, many
repeats) against an empty XDP program on the same frame; target <= 100 ns
over empty. Host build: events per second of the shared library, with the
Python model for scale.
"""
from __future__ import annotations

import ctypes
import time

from dataplane.cc import EV_ADVANCE, EV_CNP, EV_TX, BpfCC, Event, HostCC, State, core_params
from scenario.dcqcn import DcqcnConfig
from dataplane.cc_model import DcqcnModel
from dataplane.prog_test_run import prog_test_run

REPEAT = 200_000


def bpf_ns_per_event() -> list[tuple[str, float, float]]:
    from bcc import BPF

    from dataplane.bpf_build import compile_bpf

    # Every run starts from one template state (three cuts ago, timers
    # due), so each repeat does the whole event: timers, then the event.
    cc = BpfCC(from_template=True)
    host = HostCC()
    params = core_params(DcqcnConfig(rpg_byte_reset=16384, rate_reduce_monitor_period_us=0))
    template = host.run(params, [Event(kind=EV_CNP, now_ns=t) for t in (0, 10_000, 20_000)])[-1]
    cc.set_params(params)
    cc.set_state(template, slot=1)
    empty = compile_bpf("xdp_pass")
    empty_fd = empty.load_func("xdp_pass", BPF.XDP).fd
    rows = []
    later = 20_000 + 7 * params.rpg_time_reset_ns + 1
    for name, ev in [("cnp (timers + cut)", Event(kind=EV_CNP, now_ns=later)),
                     ("tx (timers + 4 BC events)", Event(kind=EV_TX, bytes=65536, now_ns=later)),
                     ("timers only", Event(kind=EV_ADVANCE, now_ns=later)),
                     ("tx, no increase due", Event(kind=EV_TX, bytes=1024, now_ns=20_001))]:
        frame = bytes(ev)
        best_cc = min(prog_test_run(cc.fd, frame, REPEAT).duration_ns for _ in range(5))
        best_empty = min(prog_test_run(empty_fd, frame, REPEAT).duration_ns for _ in range(5))
        rows.append((name, best_cc, best_empty))
    cc.close()
    empty.cleanup()
    return rows


def host_events_per_s(n: int = 1_000_000) -> float:
    host = HostCC()
    params = core_params(DcqcnConfig(rpg_byte_reset=0))
    kinds = (EV_TX, EV_TX, EV_TX, EV_CNP, EV_ADVANCE)
    events = (Event * n)(*[Event(kind=kinds[i % 5], bytes=4096, now_ns=i * 2_000) for i in range(n)])
    state = State()
    start = time.perf_counter()
    host.lib.cc_apply_events(ctypes.byref(params), ctypes.byref(state), events, n, None)
    return n / (time.perf_counter() - start)


def indexed_events_per_s(qps: int, n: int = 1_000_000) -> float:
    """cc_apply_indexed: one time-ordered array of n events spread at
    random over `qps` states, as a simulator drives its QPs."""
    import numpy as np

    from dataplane.cc import EVENT_DTYPE, STATE_DTYPE

    host = HostCC()
    params = core_params(DcqcnConfig(rpg_byte_reset=0))
    rng = np.random.default_rng(1)
    events = np.zeros(n, dtype=EVENT_DTYPE)
    events["kind"] = rng.choice([EV_TX, EV_TX, EV_TX, EV_CNP, EV_ADVANCE], n)
    events["bytes"] = 4096
    events["now_ns"] = np.arange(n, dtype=np.uint64) * 2_000          # one event every 2 us, any QP
    qp = rng.integers(0, qps, n, dtype=np.uint32)
    states = np.zeros(qps, dtype=STATE_DTYPE)
    start = time.perf_counter()
    host.apply_indexed(params, states, events, qp)
    return n / (time.perf_counter() - start)


def model_events_per_s(n: int = 100_000) -> float:
    params = core_params(DcqcnConfig(rpg_byte_reset=0))
    model = DcqcnModel(params, exact_steps=0)
    kinds = (EV_TX, EV_TX, EV_TX, EV_CNP, EV_ADVANCE)
    events = [Event(kind=kinds[i % 5], bytes=4096, now_ns=i * 2_000) for i in range(n)]
    start = time.perf_counter()
    for ev in events:
        model.apply(ev)
    return n / (time.perf_counter() - start)


def main() -> None:
    print("CC core, BPF build (PROG_TEST_RUN, best of 5 x 200k repeats, ns per event):")
    print(f"  {'event':<24}{'cc_test':>9}{'empty XDP':>11}{'over empty':>12}")
    for name, ns_cc, ns_empty in bpf_ns_per_event():
        print(f"  {name:<24}{ns_cc:>9}{ns_empty:>11}{ns_cc - ns_empty:>12}")
    host, model = host_events_per_s(), model_events_per_s()
    print("CC core, host build vs the Python float model (events per second):")
    print(f"  host library {host:>14,.0f}   ({1e9 / host:.1f} ns/event)")
    print(f"  Python model {model:>14,.0f}   (host is {host / model:.0f}x faster)")
    print("CC core, host build, indexed batch (cc_apply_indexed: events spread over N QP states):")
    for qps in (64, 512, 4096):
        rate = indexed_events_per_s(qps)
        print(f"  {qps:>5} QPs {rate:>14,.0f} events/s   ({1e9 / rate:.1f} ns/event)")


if __name__ == "__main__":
    main()
