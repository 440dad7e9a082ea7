"""Completion visibility and callback lateness of the TX engine on a live
testbed, inside a private sandbox (not a test: shared machines are noisy).

h0 sends h1 one 16 KB message every millisecond from a timer chain (what
a workload's compute phases look like to the engine) while a long flow
h2 -> h3 keeps the engine busy sending. Per message, from nic_rx's stamps
and the engine's callbacks:
- receive lateness: the watch callback's time against its visible time
  (the last packet's arrival plus the one-way delay where links add none);
- send lateness: the completion callback against its visible time (the
  ACK's arrival, plus the round trip where links add none);
- ACK lag: the ACK's arrival at h0 against the last packet's at h1;
- timer lateness: every call_at, against its due time.
Target: p99 lateness under 100 us.
"""
from __future__ import annotations

import tempfile

import numpy as np

from testbed.isolated import run_sandboxed

MESSAGES = 300
LENGTH = 16 * 1024
PERIOD_NS = 1_000_000


def _measure():
    import os

    from dataplane.nic import TAKEN_RING_WORD, QP_RX_WORDS, stamp_at
    from dataplane.tx_engine import now_ns
    from experiment.emulator import Emulator
    from scenario.spec import parse_scenario
    from testbed.builder import Testbed
    from testbed.state import StateStore

    scenario = parse_scenario({"traffic": {"flows": [["h0", "h1"]]}})
    with tempfile.TemporaryDirectory() as state, Testbed.up(scenario, StateStore(state)) as testbed:
        emu = Emulator(testbed, scenario.live)
        os.sched_setaffinity(0, {0})
        try:
            send, recv = emu.connect("h0", "h1")
            busy, _ = emu.connect("h2", "h3")
            engine, rx_words = emu.engine, emu.rx_view.words()
            taken_ring = recv * QP_RX_WORDS + TAKEN_RING_WORD
            ack_delay = engine.qps[send].ack_delay_ns
            received, completed, timers, ack_lag, held = [], [], [], [], []

            def on_receive(qpn, msn, visible):
                received.append(now_ns() - visible)
                taken = stamp_at(rx_words, taken_ring, msn)
                if taken:
                    held.append(visible - taken)

            def on_complete(msg):
                completed.append(now_ns() - msg.completed_ns)
                taken = stamp_at(rx_words, taken_ring, len(completed))      # messages complete in order
                if taken:
                    ack_lag.append(msg.completed_ns - ack_delay - taken)

            emu.watch_receives(recv, on_receive)
            start = now_ns() + 5_000_000

            def post(i, due):
                timers.append(now_ns() - due)
                engine.post(send, LENGTH, tag=i, on_complete=on_complete)
                if i + 1 < MESSAGES:
                    engine.call_at(due + PERIOD_NS, lambda: post(i + 1, due + PERIOD_NS))

            engine.call_at(start, lambda: post(0, start))
            engine.post(busy, 2**31)
            engine.run(duration_s=start / 1e9 - now_ns() / 1e9 + MESSAGES * PERIOD_NS / 1e9 + 0.5,
                       until=lambda: len(completed) == MESSAGES)
            return (np.array(received), np.array(completed), np.array(timers), np.array(ack_lag),
                    np.array(held), testbed.record.get("delay_method"))
        finally:
            emu.close()


def main() -> None:
    received, completed, timers, ack_lag, held, method = run_sandboxed(_measure, timeout_s=300)
    print(f"Completions, {MESSAGES} messages of {LENGTH // 1024} KB h0 -> h1 one per ms from a timer, "
          f"a long flow h2 -> h3 alongside (delay method {method}):")
    for name, lateness in (("receive callback", received), ("send completion", completed),
                           ("timer", timers)):
        us = lateness / 1e3
        print(f"  {name:<17} late p50 {np.percentile(us, 50):6.1f} us, p99 {np.percentile(us, 99):6.1f} us, "
              f"max {us.max():7.1f} us over {len(us)} (target p99 < 100 us)")
    for name, lag in (("last packet -> receive visible", held), ("last packet -> ACK back", ack_lag)):
        us = lag / 1e3
        print(f"  {name:<31} p50 {np.percentile(us, 50):7.1f} us, p99 {np.percentile(us, 99):7.1f} us")


if __name__ == "__main__":
    main()
