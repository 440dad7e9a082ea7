"""The control plane's reaction: from a progress event reaching the
controller to the hook-map write it causes, wall time in this process
(the loop that runs the workload runs it inline). A 4-rank training job
with a transient straggler and an on-off background runs on the
serial-link transport, so that only the controller's own work is timed;
the hook map is the real BPF map, written through mmap. Target: p99
under 1 ms."""
from __future__ import annotations

import statistics
import time

from control.controller import Controller
from dataplane.cc import core_params
from dataplane.hooks import HookMap
from dataplane.nic import Nic
from scenario.dcqcn import DcqcnConfig
from scenario.spec import parse_scenario
from workload import events as ev
from workload.driver import Workload
from workload.ideal import IdealTransport
from workload.stats import percentile

SCENARIO = {
    "topology": {"hosts": 4},
    "control": {"policy": "prc"},
    "job": [
        {"name": "train", "iterations": 60,
         "model": {"forward_us": 267, "backward_us": 533, "gradient_bytes": 5_000_000},
         "stragglers": {"probability": 0.05, "duration": [1, 2], "slowdown": [0.3, 1.0]}},
        {"name": "bg", "kind": "onoff", "burst_bytes": 5_000_000, "period_us": 1600,
         "model": {"chunk_bytes": 262144}},
    ],
}


def main() -> None:
    nic = Nic()
    nic.configure(1e9, 20_000, 50_000, core_params(DcqcnConfig()))
    hooks = HookMap.of_table(nic.bpf["proc_hook"])
    scenario = parse_scenario(SCENARIO)
    transport = IdealTransport(1e9, 100_000)
    workload = Workload(scenario.jobs, transport, 100, ev.EventBus())
    controller = Controller(scenario.control, workload, hooks, 100)
    writing, quiet = [], []

    def timed(event) -> None:
        before = len(controller.decisions)
        t0 = time.perf_counter_ns()
        controller.on_event(event)
        (writing if len(controller.decisions) > before else quiet).append(time.perf_counter_ns() - t0)

    workload.bus.subscribe(timed)
    workload.start()
    transport.run(until=lambda: workload.finished)
    print("Control plane: progress event -> hook write (wall ns in the workload's loop, prc policy, "
          f"{len(writing) + len(quiet)} events):")
    for name, values in (("events that wrote a hook", writing), ("events that wrote none", quiet)):
        if values:
            print(f"  {name:<26} n={len(values):>6}  p50 {statistics.median(values) / 1e3:7.1f} us"
                  f"  p99 {percentile(sorted(values), 0.99) / 1e3:7.1f} us")
    hooks.close()


if __name__ == "__main__":
    main()
