"""Progress events of every rank, what an NCCL profiler plugin would
report, on an in-process bus: the recorder and the control plane
subscribe."""
from __future__ import annotations

from dataclasses import dataclass

# Event kinds, in the order a rank passes through them.
ITERATION_START = "iteration_start"
COMPUTE_START = "compute_start"
COMPUTE_END = "compute_end"
WAIT_START = "wait_start"            # blocked on a peer's data (pipeline input) or a burst's time
WAIT_END = "wait_end"
STEP_START = "step_start"            # one step of a collective or one p2p transfer
STEP_END = "step_end"
ITERATION_END = "iteration_end"
GPU_SAMPLE = "gpu_sample"            # the rank's GPU computes at `speed` from now on (NVML or a replayed trace)
KINDS = (ITERATION_START, COMPUTE_START, COMPUTE_END, WAIT_START, WAIT_END, STEP_START, STEP_END, ITERATION_END,
         GPU_SAMPLE)


@dataclass(frozen=True, slots=True)
class Event:
    t_ns: int                  # the transport's clock (CLOCK_MONOTONIC live)
    job: str
    rank: int
    proc: int                  # the NIC process that owns the rank's QPs
    iteration: int
    kind: str
    detail: str = ""           # e.g. "dp-allreduce step 3/6", "F mb 2"
    bytes_remaining: int = 0   # what the rank still has to send in this iteration
    speed: float = 1.0         # GPU_SAMPLE: compute speed, a fraction of nominal


class EventBus:
    def __init__(self):
        self._subscribers = []

    def subscribe(self, fn) -> None:
        """fn(event) for every event published from now on."""
        self._subscribers.append(fn)

    def publish(self, event: Event) -> None:
        for fn in self._subscribers:
            fn(event)
